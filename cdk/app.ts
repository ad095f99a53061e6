/**
 * The CDK app. `npm run synth` synthesises it offline with no AWS credentials (the stack is
 * environment-agnostic); `cdk deploy -c stage=dev` deploys a named stage.
 */
import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { SwitchboardStack } from './stack.ts';

/** Builds the app: one Switchboard stack for the stage, with cdk-nag's AwsSolutions pack. */
export function buildApp(app: App = new App()): { app: App; stack: SwitchboardStack } {
  const stage = String(app.node.tryGetContext('stage') ?? 'prod');
  const stack = new SwitchboardStack(app, `Switchboard-${stage}`, {
    stage,
    description: 'Switchboard: LINE webhooks and outbound call/message jobs, exactly once',
  });
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  return { app, stack };
}

if (import.meta.main) {
  buildApp().app.synth();
}
