/**
 * Zod Mini (`zod/mini`) is the same checks as Zod with functions instead of methods, so a bundle
 * carries only what it uses (about 25 KB where classic Zod takes 444 KB of every Lambda bundle that
 * imports it). Used where a Lambda's cold start matters and the schemas are few: the webhook
 * receiver's LINE bodies, the email-events function's SES events. A module using it imports
 * `zod/mini` itself (a namespace passed on through another module is bundled whole) and this one
 * for its side effect: Zod Mini loads no locale, and English is what the issues whose own message
 * is passed on are read in.
 */
import { config } from 'zod/mini';
import en from 'zod/v4/locales/en.js';

config(en());
