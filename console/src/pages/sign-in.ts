/** Sign-in: user name and password; a first sign-in with a temporary password sets a new one. */
import type { App, Page } from '../app.ts';
import { signInProblem } from '../auth.ts';
import { field, h, replace } from '../dom.ts';
import { forgetPlace, placeToReturnTo } from '../return-to.ts';

export function signInPage(app: App): Page {
  const status = h('p', { class: 'form-errors', role: 'alert' });
  const place = placeToReturnTo(location.hash);
  const back = () => {
    forgetPlace();
    app.go(place?.hash ?? '#/');
  };
  const username = h('input', { autocomplete: 'username', required: true });
  const password = h('input', { type: 'password', autocomplete: 'current-password', required: true });
  const form = h(
    'form',
    { class: 'card narrow', 'aria-label': 'Sign in' },
    h('h1', {}, 'Sign in'),
    place?.why === 'expired'
      ? h(
          'p',
          { class: 'note', role: 'status' },
          'Your session has expired. Sign in again to return to the page you were on.',
        )
      : null,
    field('User name', 'username', username),
    field('Password', 'password', password),
    status,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    status.textContent = 'Signing in…';
    try {
      const result = await app.session.signIn(username.value.trim(), password.value);
      if (result.kind === 'signed-in') back();
      else replace(form, ...newPasswordForm(username.value.trim(), result.session, app, back).children);
    } catch (error) {
      status.textContent = signInProblem(error);
    }
  });
  return { title: 'Sign in', element: h('main', {}, form) };
}

function newPasswordForm(username: string, session: string, app: App, back: () => void): HTMLFormElement {
  const status = h('p', { class: 'form-errors', role: 'alert' });
  const password = h('input', {
    type: 'password',
    autocomplete: 'new-password',
    required: true,
    minlength: 12,
  });
  const form = h(
    'form',
    { class: 'card narrow' },
    h('h1', {}, 'Choose a new password'),
    h('p', {}, 'Your password was temporary. At least 12 characters, with upper and lower case and a digit.'),
    field('New password', 'newPassword', password),
    status,
    h('button', { type: 'submit', class: 'primary' }, 'Set password and sign in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await app.session.setNewPassword(username, password.value, session);
      back();
    } catch (error) {
      status.textContent = signInProblem(error);
    }
  });
  return form;
}
