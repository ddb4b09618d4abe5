/** The name this service gives itself in health answers, the OpenAPI document and traces. */
export const SERVICE_NAME = 'research-control-plane';
