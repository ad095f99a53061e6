import { describe, expect, it } from 'vitest';
import { messageObjectProblems } from '#shared/line/message-objects.ts';

/**
 * Message objects as LINE documents them ("Message objects" in the Messaging API reference): each
 * valid one passes, each mistake is named at its property in LINE's words.
 */
describe('LINE message objects, checked by type before a campaign starts', () => {
  it('passes the documented examples of every type', () => {
    expect(
      messageObjectProblems([
        { type: 'text', text: 'Hello, world' },
        { type: 'sticker', packageId: '446', stickerId: '1988' },
        {
          type: 'image',
          originalContentUrl: 'https://example.com/original.jpg',
          previewImageUrl: 'https://example.com/preview.jpg',
        },
        { type: 'audio', originalContentUrl: 'https://example.com/original.m4a', duration: 60000 },
        {
          type: 'location',
          title: 'my location',
          address: '1-3 Kioicho, Chiyoda-ku, Tokyo, 102-8282, Japan',
          latitude: 35.67966,
          longitude: 139.73669,
        },
        {
          type: 'flex',
          altText: 'this is a flex message',
          contents: { type: 'bubble', body: { type: 'box', layout: 'vertical', contents: [] } },
        },
        {
          type: 'template',
          altText: 'This is a buttons template',
          template: { type: 'buttons', text: 'Please select', actions: [] },
        },
      ]),
    ).toEqual([]);
  });

  it('names an unknown type, a sticker without its ids, an empty text, a non-https image', () => {
    expect(
      messageObjectProblems([
        { type: 'txt', text: 'x' },
        { type: 'sticker', packageId: '446' },
        { type: 'text', text: '' },
        {
          type: 'image',
          originalContentUrl: 'http://example.com/a.jpg',
          previewImageUrl: 'https://example.com/p.jpg',
        },
        'hello',
      ]),
    ).toEqual([
      {
        property: 'messages[0].type',
        path: [0, 'type'],
        message: expect.stringMatching(/^must be one of the following values: \[text, textV2, sticker, /),
      },
      { property: 'messages[1].stickerId', path: [1, 'stickerId'], message: 'must be a string' },
      { property: 'messages[2].text', path: [2, 'text'], message: 'must be 1 to 5000 characters' },
      {
        property: 'messages[3].originalContentUrl',
        path: [3, 'originalContentUrl'],
        message: 'must be an https URL of at most 2000 characters',
      },
      { property: 'messages[4]', path: [4], message: 'must be a message object' },
    ]);
  });

  it('checks a placeholder’s string for what it has whatever fills it', () => {
    expect(
      messageObjectProblems([
        { type: 'image', originalContentUrl: '{{photo}}', previewImageUrl: '{{preview}}' },
        { type: 'text', text: `{{name}} ${'あ'.repeat(4999)}` },
      ]),
    ).toEqual([]);
    expect(messageObjectProblems([{ type: 'text', text: `{{name}}${'あ'.repeat(5001)}` }])).toEqual([
      { property: 'messages[0].text', path: [0, 'text'], message: 'must be 1 to 5000 characters' },
    ]);
  });

  it('names what a flex, a template and a location lack', () => {
    const properties = messageObjectProblems([
      { type: 'flex', contents: { type: 'bubble' } },
      { type: 'template', altText: 'a'.repeat(401), template: { type: 'confirm' } },
      { type: 'location', title: 't', address: 'a', latitude: 'north', longitude: 139 },
    ]).map((p) => p.property);
    expect(properties).toEqual(['messages[0].altText', 'messages[1].altText', 'messages[2].latitude']);
  });
});
