import { describe, expect, it } from 'vitest';
import { assertJava17, JavaMissingError } from '#local/cloud.ts';

describe('the local cloud needs Java 17+', () => {
  it('says in one line what to install when java is not on PATH', () => {
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      expect(() => assertJava17()).toThrow(JavaMissingError);
      expect(() => assertJava17()).toThrow(/Java 17\+ runtime.*not found on PATH: install one/);
    } finally {
      process.env.PATH = saved;
    }
  });
});
