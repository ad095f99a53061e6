/** A channel's automatic answers: keyword rules matched on RE2's linear-time engine. */
import { RE2JS } from 're2js';
import { type Channel, type KeywordRule, MAX_MATCHED_TEXT } from './channel.ts';

/**
 * Keyword rules' regular expressions run on RE2's linear-time engine (`re2js`, a JavaScript port of
 * RE2): any LINE user's text is matched in time proportional to its length, whatever pattern an
 * operator saved. Node's backtracking engine has no time limit: `^(a|a)*$` against 29 `a`s and a
 * `!` blocked the process for seconds, and no syntactic check catches every such pattern. RE2 has
 * no backreferences or lookaround; a pattern using them is refused when saved.
 */
const compiled = new Map<string, RE2JS>();
const MAX_COMPILED = 1_000;

/** The rule's pattern compiled (cached); throws on a pattern RE2 cannot compile. */
export function compileRule(pattern: string, ignoreCase: boolean): RE2JS {
  const key = `${ignoreCase ? 'i' : '-'}${pattern}`;
  let regex = compiled.get(key);
  if (!regex) {
    regex = RE2JS.compile(pattern, ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(key, regex);
  }
  return regex;
}

/** The automatic answer to a text message: the first matching rule, else the fallback. */
export function answerFor(channel: Channel, messageText: string): string | undefined {
  const textToMatch = messageText.slice(0, MAX_MATCHED_TEXT);
  for (const rule of channel.rules) {
    if (ruleMatches(rule, textToMatch)) return rule.answer;
  }
  return channel.fallback;
}

function ruleMatches(rule: KeywordRule, value: string): boolean {
  const fold = (s: string) => (rule.ignoreCase ? s.toLocaleLowerCase() : s);
  switch (rule.match) {
    case 'exact':
      return fold(value.trim()) === fold(rule.pattern.trim());
    case 'contains':
      return fold(value).includes(fold(rule.pattern));
    case 'regex':
      return compileRule(rule.pattern, rule.ignoreCase === true)
        .matcher(value)
        .find();
  }
}
