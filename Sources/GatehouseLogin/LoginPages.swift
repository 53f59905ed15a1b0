import Foundation
import Mustache

/// The hosted login's pages: Mustache templates (values HTML-escaped by `{{…}}`), one layout.
enum LoginPages {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        // The templates are constants of this file, so a failure here is a programming error that
        // every test of the login would show; an empty library renders the fallback text.
        for (name, text) in [
            ("layout", layout), ("login", login), ("consent", consent), ("problem", problem),
            ("logout", logout), ("notice", notice), ("phone", phone), ("passkeys", passkeys),
        ] {
            try? library.register(text, named: name)
        }
        return library
    }()

    /// The page `name` with `values`, inside the layout.
    static func render(_ name: String, title: String, _ values: [String: Any]) -> String {
        let body = library.render(values, withTemplate: name) ?? "The page could not be shown."
        return library.render(["title": title, "body": body], withTemplate: "layout") ?? body
    }

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Gatehouse</title>
        <style>
          :root { color-scheme: light dark; --accent: #2f5bea; }
          body { margin: 0; min-height: 100vh; display: grid; place-items: center;
                 font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
                 background: #f3f5f9; color: #1c2333; }
          main { width: min(92vw, 380px); background: #fff; border-radius: 14px; padding: 2rem 2rem 1.5rem;
                 box-shadow: 0 10px 30px rgba(20, 30, 60, .12); }
          .brand { display: flex; align-items: center; gap: .6rem; font-weight: 600; margin-bottom: 1.25rem; }
          .brand span { display: inline-grid; place-items: center; width: 2rem; height: 2rem; border-radius: 8px;
                        background: var(--accent); color: #fff; font-weight: 700; }
          h1 { font-size: 1.35rem; margin: 0 0 .25rem; }
          p.lead { margin: 0 0 1.25rem; color: #55607a; }
          label { display: block; font-weight: 600; margin: .9rem 0 .3rem; }
          input[type=email], input[type=password], input[type=text] { width: 100%; box-sizing: border-box;
                 padding: .65rem .75rem; border: 1px solid #c9d0de; border-radius: 8px; font: inherit; }
          input:focus, button:focus { outline: 3px solid rgba(47, 91, 234, .35); outline-offset: 1px; }
          button { width: 100%; margin-top: 1.25rem; padding: .7rem; border: 0; border-radius: 8px;
                   background: var(--accent); color: #fff; font: inherit; font-weight: 600; cursor: pointer; }
          button.secondary { background: #e7ebf3; color: #1c2333; margin-top: .6rem; }
          a.button { display: block; box-sizing: border-box; text-align: center; text-decoration: none; padding: .7rem;
                     border-radius: 8px; font-weight: 600; margin-top: .6rem; background: #e7ebf3; color: #1c2333; }
          .error { background: #fdecec; color: #8a1c1c; border-radius: 8px; padding: .6rem .75rem; margin: 0 0 1rem; }
          .notice { background: #e8f4ec; color: #1d5b32; border-radius: 8px; padding: .6rem .75rem; margin: 0 0 1rem; }
          .number { font-size: 3rem; font-weight: 700; letter-spacing: .1em; text-align: center; margin: .5rem 0; }
          .qr { display: grid; place-items: center; margin: .5rem 0; } .qr svg { width: 220px; height: 220px; }
          .code { font-size: .8rem; color: #55607a; word-break: break-all; }
          ul.passkeys { list-style: none; padding: 0; margin: 0 0 1rem; }
          ul.passkeys li { display: flex; justify-content: space-between; align-items: center; gap: .5rem;
                           padding: .5rem 0; border-bottom: 1px solid #e7ebf3; }
          button.small { width: auto; margin: 0; padding: .35rem .7rem; font-size: .85rem; }
          footer { margin-top: 1.25rem; font-size: .8rem; color: #7a859c; text-align: center; }
          @media (prefers-color-scheme: dark) {
            body { background: #10141d; color: #e6e9f0; } main { background: #1a2030; box-shadow: none; }
            p.lead, footer { color: #9aa4ba; } input[type=email], input[type=password], input[type=text] {
            background: #10141d; color: #e6e9f0; border-color: #39425a; } button.secondary, a.button {
            background: #2a3246; color: #e6e9f0; } .error { background: #4a1c1c; color: #ffd9d9; } }
        </style>
        </head>
        <body>
        <main>
        <div class="brand" aria-hidden="true"><span>G</span> Gatehouse</div>
        {{{body}}}
        <footer>Secured by Gatehouse</footer>
        </main>
        </body>
        </html>
        """

    static let login = """
        <h1>Sign in</h1>
        <p class="lead">to continue to {{client}}</p>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{#identifier}}<form method="post" action="{{action}}">
          <input type="hidden" name="authorization" value="{{authorization}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <label for="username">E-mail address</label>
          <input id="username" name="username" type="email" autocomplete="username webauthn" required autofocus value="{{username}}">
          {{#password}}<label for="password">Password</label>
          <input id="password" name="password" type="password" autocomplete="current-password" required>
          <button type="submit" id="sign-in">Sign in</button>
          {{/password}}{{#push}}<button type="submit" id="push" formaction="{{action}}" formnovalidate class="secondary">Approve on my phone</button>
          {{/push}}</form>
        {{/identifier}}{{#qr}}<form method="post" action="{{action}}">
          <input type="hidden" name="authorization" value="{{authorization}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <button type="submit" id="qr" class="secondary">Scan a QR code with my phone</button>
        </form>
        {{/qr}}{{#passkey}}<form id="passkey-form" method="post" action="{{action}}" data-options="{{options}}">
          <input type="hidden" name="authorization" value="{{authorization}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <input type="hidden" name="credential" id="passkey-credential">
          <button type="button" id="passkey" class="secondary">Sign in with a passkey</button>
        </form>
        {{/passkey}}{{#phoneLink}}<a class="button secondary" id="phone-link" href="{{phoneLink}}">Sign in with your phone</a>
        {{/phoneLink}}{{#providers}}<form method="post" action="{{federationAction}}" class="federation">
          <input type="hidden" name="authorization" value="{{authorization}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <button type="submit" name="provider" value="{{id}}" class="secondary">Sign in with {{name}}</button>
        </form>
        {{/providers}}{{#script}}<script src="{{script}}" defer></script>{{/script}}
        """

    static let consent = """
        <h1>Allow {{client}}?</h1>
        <p class="lead">{{client}} asks to sign you in as <strong>{{username}}</strong>{{#scope}} with access to: {{scope}}{{/scope}}.</p>
        <form method="post" action="{{action}}">
          <input type="hidden" name="authorization" value="{{authorization}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <button type="submit" name="decision" value="allow">Allow</button>
          <button type="submit" name="decision" value="deny" class="secondary">Deny</button>
        </form>
        """

    static let problem = """
        <h1>{{heading}}</h1>
        <p class="error" role="alert">{{message}}</p>
        <p class="lead">Return to the app and start again.</p>
        """

    static let logout = """
        <h1>Sign out?</h1>
        <p class="lead">Sign out of Gatehouse as <strong>{{username}}</strong>{{#client}}, as {{client}} asks{{/client}}? Every application you signed in to here is signed out too.</p>
        <form method="post" action="{{action}}">
          {{#fields}}<input type="hidden" name="{{name}}" value="{{value}}">
          {{/fields}}<input type="hidden" name="csrf" value="{{csrf}}">
          <button type="submit" name="confirm" value="yes">Sign out</button>
        </form>
        """

    static let phone = """
        {{#number}}<h1>Approve on your phone</h1>
        <p class="lead">We sent a sign-in request for {{client}} to your phone. Check that it shows this number and type it there:</p>
        <p class="number" id="number" aria-label="Number to type">{{number}}</p>
        {{/number}}{{#qr}}<h1>Scan with your phone</h1>
        <p class="lead">Open the Gatehouse app on your phone and scan this code to sign in to {{client}}.</p>
        <div class="qr" id="qr-code">{{{svg}}}</div>
        <p class="code">Or copy this code into the app: <code id="otp">{{code}}</code></p>
        {{/qr}}{{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <p class="lead" id="phone-state" role="status" aria-live="polite">Waiting for your phone (at most {{seconds}} seconds)…</p>
        <form id="phone-complete" method="post" action="{{action}}" data-status="{{status}}">
          <input type="hidden" name="authorization" value="{{authorization}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <button type="submit">Continue</button>
        </form>
        <script src="{{script}}" defer></script>
        """

    static let passkeys = """
        <h1>Your passkeys</h1>
        <p class="lead">Signed in as <strong>{{username}}</strong>. A passkey signs you in with your device's screen lock, without a password.</p>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}{{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        <ul class="passkeys" id="passkey-list">
        {{#passkeys}}<li><span><strong>{{name}}</strong><br><small>Added {{created}}{{#used}} · last used {{used}}{{/used}}{{#synced}} · synced{{/synced}}</small></span>
          {{#manage}}<form method="post" action="{{action}}">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="remove" value="{{id}}">
            <button type="submit" class="secondary small">Remove</button>
          </form>{{/manage}}</li>
        {{/passkeys}}{{^passkeys}}<li class="empty">No passkeys yet.</li>{{/passkeys}}
        </ul>
        {{#manage}}<form id="passkey-register" method="post" action="{{action}}" data-options="{{options}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <input type="hidden" name="credential" id="passkey-credential">
          <label for="passkey-name">Name of the new passkey</label>
          <input id="passkey-name" name="name" type="text" maxlength="64" value="Passkey" required>
          <button type="button" id="passkey-add">Add a passkey</button>
        </form>
        {{/manage}}{{#confirm}}<p class="lead">To add or remove passkeys, confirm it is you first: with one of your passkeys{{#phoneLink}}, or with your phone{{/phoneLink}}.</p>
        <form id="passkey-form" method="post" action="{{action}}" data-options="{{options}}">
          <input type="hidden" name="csrf" value="{{csrf}}">
          <input type="hidden" name="credential" id="passkey-credential">
          <button type="button" id="passkey">Confirm with a passkey</button>
        </form>
        {{#phoneLink}}<a class="button secondary" id="phone-link" href="{{phoneLink}}">Confirm with your phone</a>
        {{/phoneLink}}{{/confirm}}        <script src="{{script}}" defer></script>
        """

    static let notice = """
        <h1>{{heading}}</h1>
        <p class="lead">{{message}}</p>
        """
}
