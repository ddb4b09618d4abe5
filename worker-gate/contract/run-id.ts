import { z } from 'zod';

const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/;

/** A run's id as the gate and the control plane both take it. */
export const RunIdSchema = z.string().regex(RUN_ID_PATTERN, 'must be 1–200 letters, digits, ".", "_", ":" or "-", starting with a letter or digit');
