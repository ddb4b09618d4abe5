import { z } from 'zod';
import { doc, optionalHttpUrl, text } from './field-kinds.ts';

/** The research room's fields: the research provider (its key comes from the environment only, RESEARCH_PROVIDER_API_KEY). */
export const researchFields = {
  research_provider_base_url: doc(optionalHttpUrl(), {
    description: 'Base URL of the OpenAI-compatible research provider; generation posts to `${base_url}/chat/completions`.',
  }),
  research_provider_model: doc(text().optional(), { description: 'Model the research provider is asked for candidates.' }),
  research_provider_quota_url: doc(optionalHttpUrl(), {
    description: 'Quota endpoint read before every provider request; generation is refused while it cannot be read.',
  }),
  research_provider_min_remaining_credits: doc(z.number().min(0).default(5), {
    description: 'Do not call the provider when fewer credits remain.',
  }),
  research_provider_request_reserve: doc(z.number().min(0).default(10), {
    description: "Requests of the provider's rolling window that generation never spends.",
  }),
  research_provider_timeout_sec: doc(z.number().positive().default(60), {
    description: 'Time limit of one quota read or generation request.',
  }),
};
