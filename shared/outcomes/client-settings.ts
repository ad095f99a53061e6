/**
 * The outcome webhook part of `PUT /clients/{id}`: validated next to the other settings (all field
 * errors reported at once), the new secret written to the secret store, the settings keeping only
 * the URL and when the secret was set.
 */
import { emptyFieldErrors, ValidationError } from '#shared/jobs/errors.ts';
import type { ClientSettings } from '#shared/jobs/model.ts';
import type { OutcomeSecretWriter } from './ports.ts';
import { type OutcomeWebhookPolicy, parseOutcomeWebhook } from './settings.ts';

/** What the client API needs for outcome webhooks; a deployment without them refuses the setting. */
export interface OutcomeWebhookDeps {
  readonly secrets: OutcomeSecretWriter;
  readonly policy: OutcomeWebhookPolicy;
}

/**
 * `parse` (the other settings' validation) run together with the outcome webhook's: throws one
 * {@link ValidationError} with every field's errors, or writes a new secret and returns the settings.
 */
export async function clientSettingsWithOutcomeWebhook(input: {
  readonly body: unknown;
  readonly existing: ClientSettings | undefined;
  readonly deps: OutcomeWebhookDeps | undefined;
  readonly now: number;
  readonly parse: () => ClientSettings;
}): Promise<ClientSettings> {
  const raw = (input.body as { outcomeWebhook?: unknown } | null | undefined)?.outcomeWebhook;
  const webhook = input.deps
    ? parseOutcomeWebhook(raw, input.existing?.outcomeWebhook, input.deps.policy, input.now)
    : raw === undefined
      ? ({ ok: true, settings: undefined } as const)
      : ({
          ok: false,
          fieldErrors: { outcomeWebhook: ['outcome webhooks are not set up in this deployment'] },
        } as const);
  let settings: ClientSettings;
  try {
    settings = input.parse();
  } catch (error) {
    if (error instanceof ValidationError && !webhook.ok) {
      throw new ValidationError(
        error.message,
        { ...error.fieldErrors, ...webhook.fieldErrors },
        { cause: error },
      );
    }
    throw error;
  }
  if (!webhook.ok) {
    throw new ValidationError(
      'invalid client settings',
      Object.assign(emptyFieldErrors(), webhook.fieldErrors),
    );
  }
  if (webhook.newSecret) await input.deps!.secrets.put(settings.clientId, webhook.newSecret, input.now);
  return webhook.settings ? { ...settings, outcomeWebhook: webhook.settings } : settings;
}
