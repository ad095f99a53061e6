/**
 * The CDK app. `npm run synth` synthesises the `local` stage offline with no AWS credentials (the
 * stack is environment-agnostic); `npm run cdk -- deploy -c stage=dev -c telephonyApiUrl=https://…`
 * deploys a named stage (settings: `./settings.ts`).
 */
import { App, Aspects } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { readDeploySettings } from './settings.ts';
import { SwitchboardStack } from './stack.ts';

/** Builds the app: one Switchboard stack for the stage, with cdk-nag's AwsSolutions pack. */
export function buildApp(app: App = new App()): { app: App; stack: SwitchboardStack } {
  const settings = readDeploySettings(app.node);
  const stack = new SwitchboardStack(app, `Switchboard-${settings.stage}`, {
    settings,
    description: 'Switchboard: LINE webhooks and outbound call/message jobs, exactly once',
  });
  Aspects.of(app).add(new AwsSolutionsChecks({ verbose: true }));
  return { app, stack };
}

if (import.meta.main) {
  buildApp().app.synth();
}
