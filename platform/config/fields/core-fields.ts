import { z } from 'zod';
import { doc } from './field-kinds.ts';

/** The core room's fields: the /svc-core store and mode, enforcement, the legacy notes route. */
export const coreFields = {
  core_store_backend: doc(z.enum(['control_plane']).default('control_plane'), {
    description: 'Store of the /svc-core sub-service: control_plane, the only value, keeps Core snapshots in the control plane\'s own database.',
  }),
  core_mode: doc(z.enum(['off', 'shadow', 'compare', 'enforce']).default('shadow'), {
    description: 'Mode of a Core snapshot that names none, and the mode /svc-core/health reports: off records nothing, shadow records, compare also warns where the snapshot disagrees with the live queue, enforce also applies its queue rows.',
  }),
  core_enforce_enabled: doc(z.boolean().default(false), {
    description: 'Allow Core snapshots in enforce mode, which write queue rows (never one in flight); without it an enforce snapshot answers 403.',
  }),
  legacy_notes_api_enabled: doc(z.boolean().default(false), {
    description: 'Serve GET /control/api/intake/legacy-notes: the latest Core snapshot from source legacy_notes, its queued projects and skipped rows; 404 when false.',
  }),
};
