/**
 * The client's email and SMS sending settings in its settings form (`docs/email.md`,
 * `docs/sms.md`): the SES From identity, its name, Reply-To and what a send SES did not answer
 * becomes; End User Messaging's origination identity, its rate in message parts a second, the
 * message type and the same rule for texts. An empty From (origination identity) is no email (SMS)
 * settings. A setting this editor does not show, and a default left as it was, go back as they
 * came: Save unchanged sends what the API gave.
 */
import { field, h } from '../dom.ts';
import type { ClientSettings } from '../types.ts';

type Delivery = 'at-most-once' | 'at-least-once';

const DELIVERY_OPTIONS: readonly (readonly [Delivery, string])[] = [
  ['at-most-once', 'End it in doubt, never sent twice (default)'],
  ['at-least-once', 'Send it once more'],
];

function select(options: readonly (readonly [string, string])[], current: string): HTMLSelectElement {
  return h(
    'select',
    {},
    ...options.map(([value, label]) => h('option', { value, selected: value === current }, label)),
  );
}

/**
 * `initial` with each of `changes` set, or removed when empty; a field's default left as it is
 * stays absent when it was absent.
 */
function edited(
  initial: object | undefined,
  changes: Readonly<Record<string, { readonly value: unknown; readonly byDefault?: unknown }>>,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...initial };
  const was = (initial ?? {}) as Readonly<Record<string, unknown>>;
  for (const [key, { value, byDefault }] of Object.entries(changes)) {
    const empty = value === '' || value === undefined || (Array.isArray(value) && value.length === 0);
    if (empty || (value === byDefault && was[key] === undefined)) delete out[key];
    else out[key] = value;
  }
  return out;
}

function emailFields(initial: ClientSettings['email']) {
  const from = h('input', { type: 'email', autocomplete: 'off', value: initial?.from ?? '' });
  const fromName = h('input', { value: initial?.fromName ?? '' });
  const replyTo = h('input', { value: (initial?.replyTo ?? []).join(', ') });
  const delivery = select(DELIVERY_OPTIONS, initial?.delivery ?? 'at-most-once');
  const element = h(
    'fieldset',
    { class: 'grid', 'data-field': 'email' },
    h('legend', {}, 'Email (Amazon SES)'),
    field(
      'From address',
      'email.from',
      from,
      'Its address or domain must be a verified SES identity; empty: no email',
    ),
    field('From name', 'email.fromName', fromName, 'Shown beside the address, e.g. ショップ'),
    field('Reply-To', 'email.replyTo', replyTo, 'Addresses separated by commas; empty for none'),
    field('When SES does not answer a send', 'email.delivery', delivery),
  );
  const value = (): Pick<ClientSettings, 'email'> => {
    if (from.value.trim() === '') return {};
    const email = edited(initial, {
      from: { value: from.value.trim() },
      // Unchanged, as it came (spaces at its ends included); else trimmed.
      fromName: { value: fromName.value === initial?.fromName ? fromName.value : fromName.value.trim() },
      replyTo: {
        value: replyTo.value
          .split(',')
          .map((a) => a.trim())
          .filter(Boolean),
      },
      delivery: { value: delivery.value, byDefault: 'at-most-once' },
    });
    return { email: email as unknown as NonNullable<ClientSettings['email']> };
  };
  return { element, value };
}

function smsFields(initial: ClientSettings['sms']) {
  const identity = h('input', { autocomplete: 'off', value: initial?.originationIdentity ?? '' });
  const rate = h('input', {
    type: 'number',
    min: 0.1,
    step: 'any',
    value: initial?.partsPerSecond === undefined ? '' : String(initial.partsPerSecond),
  });
  const type = select(
    [
      ['TRANSACTIONAL', 'Transactional: reminders, notices (default)'],
      ['PROMOTIONAL', 'Promotional: campaigns'],
    ],
    initial?.messageType ?? 'TRANSACTIONAL',
  );
  const delivery = select(DELIVERY_OPTIONS, initial?.delivery ?? 'at-most-once');
  const element = h(
    'fieldset',
    { class: 'grid', 'data-field': 'sms' },
    h('legend', {}, 'SMS (AWS End User Messaging)'),
    field(
      'Origination identity',
      'sms.originationIdentity',
      identity,
      'A phone number, sender ID or pool (its id, ARN or the number); empty: no SMS',
    ),
    field(
      'Message parts a second',
      'sms.partsPerSecond',
      rate,
      'The identity’s rate as its Messaging limits tab shows it; empty: 1 (the lowest)',
    ),
    field('Message type', 'sms.messageType', type),
    field('When the service does not answer a send', 'sms.delivery', delivery),
  );
  const value = (): Pick<ClientSettings, 'sms'> => {
    if (identity.value.trim() === '') return {};
    const sms = edited(initial, {
      originationIdentity: { value: identity.value.trim() },
      partsPerSecond: { value: rate.value === '' ? '' : Number(rate.value) },
      messageType: { value: type.value, byDefault: 'TRANSACTIONAL' },
      delivery: { value: delivery.value, byDefault: 'at-most-once' },
    });
    return { sms: sms as unknown as NonNullable<ClientSettings['sms']> };
  };
  return { element, value };
}

/** The email and SMS fieldsets of a client's settings form, and the settings they hold. */
export function sendingEditor(client: ClientSettings) {
  const email = emailFields(client.email);
  const sms = smsFields(client.sms);
  return {
    elements: [email.element, sms.element],
    value: (): Pick<ClientSettings, 'email' | 'sms'> => ({ ...email.value(), ...sms.value() }),
  };
}
