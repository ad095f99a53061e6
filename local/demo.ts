/**
 * The webhook demo `npm start` plays: LINE (the sandbox) sends signed webhooks for a user who
 * follows the demo channel, asks two things (one of them redelivered) and unfollows; Switchboard
 * answers each exactly once, and the sandbox's delivery log shows it.
 */
import type { LocalStack } from './stack.ts';
import { DEMO_CHANNEL } from './stack.ts';

export async function playWebhookDemo(stack: LocalStack, log: (line: string) => void): Promise<void> {
  const userId = `U${'d'.repeat(31)}1`;
  const { events } = stack.line;
  const url = stack.webhookUrl(DEMO_CHANNEL.channelId);
  const hours = events.text({ channelId: DEMO_CHANNEL.channelId, from: userId, text: 'Hours' });
  const batch = [
    events.follow({ channelId: DEMO_CHANNEL.channelId, from: userId }),
    hours,
    events.text({ channelId: DEMO_CHANNEL.channelId, from: userId, text: 'what is this?' }),
  ];
  log(`demo: LINE posts 3 events for ${userId} to ${url}`);
  const first = await stack.line.sendWebhook({
    url,
    channelSecret: DEMO_CHANNEL.channelSecret,
    events: batch,
  });
  log(`demo:   → ${first.status} ${first.body}`);
  const again = await stack.line.sendWebhook({
    url,
    channelSecret: DEMO_CHANNEL.channelSecret,
    events: [events.redelivered(hours)],
  });
  log(`demo: LINE redelivers the "Hours" event → ${again.status} (it must not be answered twice)`);
  const forged = await stack.line.sendWebhook({ url, channelSecret: 'not-the-secret', events: batch });
  log(`demo: a forged signature → ${forged.status} ${forged.body}`);

  const deadline = Date.now() + 15_000;
  while (stack.line.deliveriesTo(userId).length < 3 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
  }
  for (const delivery of stack.line.deliveriesTo(userId)) {
    const text = (delivery.messages[0] as { text?: string } | undefined)?.text;
    log(`demo: LINE delivered (${delivery.endpoint}, retry key ${delivery.retryKey ?? '-'}): "${text}"`);
  }
  log(`demo: duplicates seen by LINE: ${stack.line.duplicates().length}`);
  await stack.line.sendWebhook({
    url,
    channelSecret: DEMO_CHANNEL.channelSecret,
    events: [events.unfollow({ channelId: DEMO_CHANNEL.channelId, from: userId })],
  });
  log(`demo: ${userId} unfollowed: opted out of every later job of ${DEMO_CHANNEL.clientId}`);
}
