/**
 * The operator console: a single page, routed by the URL's hash. It reads where to sign in from
 * `config.json`, then shows the page the hash names; signed out, the sign-in.
 */
import '@fontsource/noto-sans-jp/400.css';
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { Api } from './api.ts';
import type { App, Page } from './app.ts';
import { Session } from './auth.ts';
import { loadConfig } from './config.ts';
import { h, replace } from './dom.ts';
import { channelPage } from './pages/channels.ts';
import { clientPage } from './pages/client.ts';
import { clientsPage } from './pages/clients.ts';
import { jobPage } from './pages/job.ts';
import { newJobPage } from './pages/new-job.ts';
import { optOutsPage } from './pages/opt-outs.ts';
import { peoplePage } from './pages/people.ts';
import { signInPage } from './pages/sign-in.ts';
import { suppressionsPage } from './pages/suppressions.ts';
import { forgetPlace, rememberPlace } from './return-to.ts';
import type { Operator } from './types.ts';

const root = document.getElementById('app')!;

function route(app: App, hash: string): Page {
  if (!app.session.signedIn) return signInPage(app);
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] === 'clients' && parts[1]) {
    if (parts[2] === 'jobs' && parts[3] === 'new') return newJobPage(app, parts[1]);
    if (parts[2] === 'jobs' && parts[3]) return jobPage(app, parts[1], parts[3]);
    if (parts[2] === 'channels' && parts[3]) return channelPage(app, parts[1], parts[3]);
    if (parts[2] === 'opt-outs') return optOutsPage(app, parts[1]);
    if (parts[2] === 'suppressions') return suppressionsPage(app, parts[1]);
    if (parts[2] === 'people') return peoplePage(app, parts[1]);
    return clientPage(app, parts[1]);
  }
  return clientsPage(app);
}

async function main(): Promise<void> {
  const config = await loadConfig();
  const session = new Session(config);
  let me: Promise<Operator> | undefined;
  let page: Page | undefined;
  const header = h('header', {});
  const view = h('div', {});
  replace(root, header, view);
  const render = () => {
    page?.dispose?.();
    page = route(app, location.hash);
    document.title = `${page.title} · Switchboard`;
    replace(
      header,
      h('a', { class: 'brand', href: '#/' }, 'Switchboard'),
      session.signedIn
        ? h(
            'span',
            { class: 'user' },
            session.username ?? '',
            ' ',
            h('button', { type: 'button', class: 'small', onclick: signOut }, 'Sign out'),
          )
        : null,
    );
    replace(view, page.element);
    // The focus goes to the new page's heading (a screen reader announces it), not to the body.
    const heading = page.element.querySelector<HTMLElement>('h1');
    heading?.setAttribute('tabindex', '-1');
    heading?.focus({ preventScroll: true });
  };
  const signOut = () => {
    forgetPlace();
    session.signOut();
    me = undefined;
    app.go('#/signin');
  };
  const app: App = {
    session,
    api: new Api(session, () => {
      me = undefined;
      // The session ended under this page: the sign-in says so and comes back here.
      rememberPlace({ hash: location.hash, why: 'expired' });
      if (location.hash !== '#/signin') app.go('#/signin');
    }),
    go: (hash) => {
      if (location.hash === hash) render();
      else location.hash = hash;
    },
    me: () => {
      me ??= app.api.json<Operator>('GET', '/me');
      return me;
    },
  };
  window.addEventListener('hashchange', render);
  render();
}

main().catch((error: Error) => {
  replace(
    root,
    h(
      'main',
      {},
      h('p', { class: 'form-errors', role: 'alert' }, `The console could not start: ${error.message}`),
    ),
  );
});
