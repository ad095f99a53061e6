/**
 * The unsubscribe link's pages, in Japanese and English: both languages on every page, the one the
 * reader's `Accept-Language` prefers first (Japanese for `ja`, English otherwise), each in an
 * element with its own `lang`. No script, no image, no request to anywhere: the only thing a page
 * may do is post its form back to its own URL, which its Content-Security-Policy says.
 */
import { createHash } from 'node:crypto';

export type PageLanguage = 'ja' | 'en';

/** What a page says: ask to confirm, confirm it is done, or why nothing was done. */
export type PageKind = 'confirm' | 'done' | 'invalid' | 'not-one-click' | 'too-large' | 'method' | 'error';

/** Entries of `Accept-Language` looked at; a longer header is read no further. */
const MAX_LANGUAGE_RANGES = 32;

/**
 * The language to show first: the `ja` or `en` range (any region) with the highest quality, the
 * earlier on a tie (RFC 9110 §12.5.4); English when neither is acceptable or the header is absent.
 */
export function preferredLanguage(acceptLanguage: string | undefined): PageLanguage {
  let best: { language: PageLanguage; q: number } | undefined;
  for (const range of (acceptLanguage ?? '').split(',').slice(0, MAX_LANGUAGE_RANGES)) {
    const [tag = '', ...params] = range.split(';').map((p) => p.trim());
    const primary = tag.split('-')[0]!.toLowerCase();
    if (primary !== 'ja' && primary !== 'en') continue;
    const qParam = params.find((p) => /^q\s*=/i.test(p));
    const q = qParam === undefined ? 1 : Number(qParam.replace(/^q\s*=\s*/i, ''));
    if (!Number.isFinite(q) || q <= 0 || q > 1) continue;
    if (!best || q > best.q) best = { language: primary, q };
  }
  return best?.language ?? 'en';
}

/**
 * The address as a page shows it: its first character, `***`, and its domain (`t***@example.com`),
 * so a forwarded link or a shoulder does not reveal whom it unsubscribes.
 */
export function maskAddress(address: string): string {
  const at = address.lastIndexOf('@');
  if (at <= 0) return '***';
  return `${[...address][0]}***${address.slice(at)}`;
}

const STYLE = [
  'body{font-family:system-ui,-apple-system,"Hiragino Sans","Noto Sans JP",sans-serif;line-height:1.6;margin:0;padding:2rem 1rem;color:#1a1a1a;background:#f6f6f6}',
  'main{max-width:36rem;margin:0 auto;background:#fff;padding:1.5rem 2rem;border-radius:8px}',
  'h1{font-size:1.4rem;margin:0 0 .5rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}',
  'section+section{border-top:1px solid #ddd;color:#444}',
  'button{font:inherit;font-size:1.05rem;padding:.6rem 1.4rem;border:0;border-radius:6px;background:#b3261e;color:#fff;cursor:pointer}',
  'button:focus-visible{outline:3px solid #1a73e8;outline-offset:2px}',
].join('');

/** The CSP source of the page's one style element (a hash: no `'unsafe-inline'`). */
const STYLE_SOURCE = `'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`;

/**
 * What every page may do: nothing but its style and a form posted back to its own origin; no
 * script, no frame around it, no base URL, no referrer, no caching (a link is one person's).
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  `style-src ${STYLE_SOURCE}`,
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The headers of every answer of the route, the tiny text one included. */
export function pageHeaders(language: PageLanguage): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'cache-control': 'no-store',
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'x-robots-tag': 'noindex, nofollow',
    'content-language': language,
    vary: 'Accept-Language',
  };
}

interface Wording {
  readonly title: string;
  readonly heading: string;
  readonly text: (address: string) => string;
}

/** Each page's words; `text` takes the masked address, already escaped. */
const WORDS: Readonly<Record<PageKind, Readonly<Record<PageLanguage, Wording>>>> = {
  confirm: {
    ja: {
      title: '配信停止の確認',
      heading: 'メールの配信を停止しますか？',
      text: (a) =>
        `下のボタンを押すと、<strong>${a}</strong> 宛てにこの送信者からメールが送られることはなくなります。`,
    },
    en: {
      title: 'Confirm unsubscribe',
      heading: 'Unsubscribe from these emails?',
      text: (a) =>
        `Press the button below and this sender will send no more emails to <strong>${a}</strong>.`,
    },
  },
  done: {
    ja: {
      title: '配信を停止しました',
      heading: '配信を停止しました',
      text: (a) => `今後、<strong>${a}</strong> 宛てにこの送信者からメールが送られることはありません。`,
    },
    en: {
      title: 'Unsubscribed',
      heading: 'You are unsubscribed',
      text: (a) => `This sender will send no more emails to <strong>${a}</strong>.`,
    },
  },
  invalid: {
    ja: {
      title: '無効なリンク',
      heading: 'このリンクは無効です',
      text: () =>
        'リンクが途中で切れているか、変更されています。メールの中のリンクを、そのままもう一度開いてください。何も変更されていません。',
    },
    en: {
      title: 'Link not valid',
      heading: 'This link is not valid',
      text: () =>
        'It may have been cut short or changed. Open the link in the email again, exactly as it is. Nothing was changed.',
    },
  },
  'not-one-click': {
    ja: {
      title: '処理できないリクエスト',
      heading: '配信停止のリクエストではありません',
      text: () => 'このリクエストは配信停止として処理できませんでした。何も変更されていません。',
    },
    en: {
      title: 'Request not understood',
      heading: 'This is not an unsubscribe request',
      text: () => 'This request could not be read as an unsubscribe. Nothing was changed.',
    },
  },
  'too-large': {
    ja: {
      title: 'リクエストが大きすぎます',
      heading: 'リクエストが大きすぎます',
      text: () => '配信停止のリクエストはごく小さなものです。何も変更されていません。',
    },
    en: {
      title: 'Request too large',
      heading: 'This request is too large',
      text: () => 'An unsubscribe request is a few bytes. Nothing was changed.',
    },
  },
  method: {
    ja: {
      title: '使えない操作',
      heading: 'この操作には対応していません',
      text: () => 'このリンクは表示（GET）と配信停止（POST）にのみ使えます。何も変更されていません。',
    },
    en: {
      title: 'Method not allowed',
      heading: 'This method is not allowed',
      text: () => 'This link can only be viewed (GET) or used to unsubscribe (POST). Nothing was changed.',
    },
  },
  error: {
    ja: {
      title: '一時的なエラー',
      heading: '一時的なエラーが発生しました',
      text: () => 'しばらくしてから、もう一度お試しください。',
    },
    en: {
      title: 'Temporary error',
      heading: 'Something went wrong on our side',
      text: () => 'Please try again in a few minutes.',
    },
  },
};

/** The confirm page's button, in both languages (the first one's first). */
const BUTTON: Readonly<Record<PageLanguage, string>> = { ja: '配信を停止する', en: 'Unsubscribe' };

/** Escapes text for HTML content and double-quoted attributes. */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/**
 * A whole page: `kind`'s words in `first` then the other language, and on the confirm page the
 * form that posts RFC 8058's one-click body (`List-Unsubscribe=One-Click`, form-urlencoded) to the
 * page's own URL. `address` is the recipient's (masked here); pages about a refused link have none.
 */
export function renderPage(kind: PageKind, first: PageLanguage, address?: string): string {
  const order: readonly PageLanguage[] = first === 'ja' ? ['ja', 'en'] : ['en', 'ja'];
  const shown = escapeHtml(maskAddress(address ?? ''));
  const sections = order.map((language, i) => {
    const words = WORDS[kind][language];
    const level = i === 0 ? 'h1' : 'h2';
    return (
      `<section lang="${language}" aria-labelledby="heading-${language}">` +
      `<${level} id="heading-${language}">${words.heading}</${level}>` +
      `<p>${words.text(shown)}</p></section>`
    );
  });
  const form =
    kind === 'confirm'
      ? `<form method="post" aria-label="${BUTTON[first]}">` +
        '<input type="hidden" name="List-Unsubscribe" value="One-Click">' +
        `<p><button type="submit">${order.map((l) => `<span lang="${l}">${BUTTON[l]}</span>`).join(' / ')}</button></p>` +
        '</form>'
      : '';
  const title = order.map((l) => WORDS[kind][l].title).join(' / ');
  return (
    `<!doctype html><html lang="${first}"><head><meta charset="utf-8">` +
    '<meta name="viewport" content="width=device-width, initial-scale=1">' +
    '<meta name="robots" content="noindex, nofollow">' +
    `<title>${title}</title><style>${STYLE}</style></head>` +
    `<body><main>${sections[0]}${form}${sections[1]}</main></body></html>`
  );
}
