import Foundation
import Mustache

/// The console's pages: Mustache templates (values HTML-escaped by `{{…}}`), one layout, and
/// the style sheet served beside them (the pages carry no inline style and no script).
enum AdminConsolePages {
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        // The templates are constants of this file, so a failure here is a programming error that
        // every test of the console would show; an empty library renders the fallback text.
        for (name, text) in [
            ("layout", layout), ("message", message), ("signIn", signIn), ("home", home), ("user", user),
            ("confirm", confirm), ("audit", audit), ("events", events),
        ] {
            try? library.register(text, named: name)
        }
        return library
    }()

    /// The page `name` with `values`, inside the layout (`chrome`: the header's navigation and
    /// sign-out form, for a signed-in operator).
    static func render(_ name: String, title: String, _ values: [String: Any], chrome: [String: Any]?) -> String {
        let body = library.render(values, withTemplate: name) ?? "The page could not be shown."
        var layoutValues: [String: Any] = ["title": title, "body": body, "style": AdminConsole.stylePath]
        if let chrome { layoutValues["chrome"] = chrome }
        return library.render(layoutValues, withTemplate: "layout") ?? body
    }

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="robots" content="noindex">
        <title>{{title}} · Gatehouse admin console</title>
        <link rel="stylesheet" href="{{style}}">
        </head>
        <body>
        <header class="bar">
          <a class="brand" href="/admin/"><span aria-hidden="true">G</span> Gatehouse admin console</a>
          {{#chrome}}<nav aria-label="Console">
            <a href="/admin/"{{#searchActive}} aria-current="page"{{/searchActive}}>Find a user</a>
            <a href="/admin/audit" id="audit-link"{{#auditActive}} aria-current="page"{{/auditActive}}>Audit trail</a>
          </nav>
          <form class="who" method="post" action="/admin/sign-out">
            <span id="operator">{{subject}} · {{access}}</span>
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button type="submit" class="link" id="sign-out">Sign out</button>
          </form>{{/chrome}}
        </header>
        <main>
        {{{body}}}
        </main>
        <footer>Times are in UTC. Every change made here is recorded in the audit trail under your name.</footer>
        </body>
        </html>
        """

    static let message = """
        <section class="card narrow">
        <h1>{{heading}}</h1>
        <p class="{{kind}}" role="{{role}}">{{message}}</p>
        {{#signIn}}<p><a class="button" id="sign-in" href="{{signIn}}">Sign in again</a></p>{{/signIn}}
        {{#back}}<p><a class="button secondary" id="back" href="{{back}}">{{backLabel}}</a></p>{{/back}}
        </section>
        """

    static let signIn = """
        <section class="card narrow">
        <h1>Sign in to the admin console</h1>
        <p class="lead">The console is for the helpdesk: find a user, see their devices and recent sign-ins, and \
        revoke or remove what they lost.</p>
        <p class="lead">You sign in at the Gatehouse login with {{methods}}.</p>
        <p><a class="button" id="sign-in" href="{{signIn}}">Sign in</a></p>
        </section>
        """

    static let home = """
        <section class="card">
        <h1>Find a user</h1>
        <form class="search" method="get" action="/admin/" role="search">
          <label for="q">E-mail address, or the start of it, or a profile or installation id</label>
          <div class="row">
            <input id="q" name="q" type="search" value="{{query}}" autocomplete="off" autofocus required maxlength="254">
            <button type="submit" id="search">Search</button>
          </div>
        </form>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{#searched}}{{#hasResults}}<table id="results">
          <caption>{{found}}</caption>
          <thead><tr><th scope="col">User</th><th scope="col">Signed up with</th><th scope="col">Profiles</th><th scope="col">Last used</th></tr></thead>
          <tbody>
          {{#results}}<tr>
            <td><a class="user-link" href="{{link}}">{{subject}}</a></td>
            <td>{{identityProvider}}</td><td>{{profiles}}</td><td>{{lastUsed}}</td>
          </tr>
          {{/results}}</tbody>
        </table>{{/hasResults}}{{^hasResults}}<p class="notice" id="no-results" role="status">No user matches “{{query}}”.</p>{{/hasResults}}{{/searched}}
        </section>
        """

    static let user = """
        <p class="crumbs"><a href="/admin/">Find a user</a> › {{subject}}</p>
        {{#notice}}<p class="notice" id="notice" role="status">{{notice}}</p>{{/notice}}
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <section class="card">
        <h1 id="user">{{subject}}</h1>
        <p class="lead">Signed up with <strong>{{identityProviderName}}</strong>. {{profileCount}}</p>
        </section>
        {{#profiles}}<section class="card profile" id="profile-{{id}}">
        <h2>Profile {{id}} <small>{{appID}}</small></h2>
        <dl class="facts">
          <div><dt>Installation</dt><dd class="mono">{{installationID}}</dd></div>
          <div><dt>Registered</dt><dd>{{created}}</dd></div>
          <div><dt>Last used</dt><dd>{{lastUsed}}</dd></div>
          {{#expires}}<div><dt>Registration lapses</dt><dd>{{expires}}</dd></div>{{/expires}}
          <div><dt>Failed attempts</dt><dd class="{{#failing}}warn{{/failing}}" id="failures-{{id}}">{{failures}}</dd></div>
          <div><dt>Push</dt><dd>{{push}}</dd></div>
        </dl>
        <h3>Authenticators</h3>
        <table>
          <thead><tr><th scope="col">Authenticator</th><th scope="col">Added</th><th scope="col"><span class="hidden">Action</span></th></tr></thead>
          <tbody>{{#authenticators}}<tr><td>{{id}}</td><td>{{added}}</td><td>{{#removable}}<form method="post" action="/admin/confirm">
            <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="remove-authenticator">
            <input type="hidden" name="profile" value="{{profile}}"><input type="hidden" name="authenticator" value="{{id}}">
            <input type="hidden" name="identity_provider" value="{{identityProvider}}"><input type="hidden" name="subject" value="{{subject}}">
            <button type="submit" class="small secondary">Remove…</button></form>{{/removable}}</td></tr>
          {{/authenticators}}</tbody>
        </table>
        <h3>Sessions</h3>
        {{#hasSessions}}<table>
          <thead><tr><th scope="col">Session</th><th scope="col">Last token</th><th scope="col">Expires</th><th scope="col">State</th></tr></thead>
          <tbody>{{#sessions}}<tr><td class="mono">{{id}}</td><td>{{issued}}</td><td>{{expires}}</td><td>{{state}}</td></tr>
          {{/sessions}}</tbody>
        </table>{{/hasSessions}}{{^hasSessions}}<p class="muted">No sessions.</p>{{/hasSessions}}
        {{#actions}}<h3>Actions</h3>
        <div class="actions">
        {{#buttons}}<form method="post" action="/admin/confirm">
          <input type="hidden" name="csrf" value="{{csrf}}"><input type="hidden" name="action" value="{{action}}">
          <input type="hidden" name="profile" value="{{profile}}">
          <input type="hidden" name="identity_provider" value="{{identityProvider}}"><input type="hidden" name="subject" value="{{subject}}">
          <button type="submit" id="{{action}}-{{profile}}" class="{{style}}">{{label}}</button>
        </form>
        {{/buttons}}</div>{{/actions}}
        </section>
        {{/profiles}}
        {{#hasPending}}<section class="card">
        <h2>Waiting for the user's answer</h2>
        <table>
          <thead><tr><th scope="col">Request</th><th scope="col">From</th><th scope="col">Type</th><th scope="col">Started</th><th scope="col">Lapses</th></tr></thead>
          <tbody>{{#pending}}<tr><td class="mono">{{id}}</td><td>{{apiClient}}</td><td>{{type}}</td><td>{{created}}</td><td>{{expires}}</td></tr>
          {{/pending}}</tbody>
        </table>
        </section>{{/hasPending}}
        <section class="card">
        <h2>Recent events</h2>
        {{> events}}
        <p><a href="{{allEvents}}" id="all-events">All events of this user</a></p>
        </section>
        """

    static let events = """
        {{#hasEvents}}<table class="events" id="events">
          <thead><tr><th scope="col">When (UTC)</th><th scope="col">What</th><th scope="col">Who</th><th scope="col">User</th><th scope="col">Profile</th><th scope="col">Details</th></tr></thead>
          <tbody>{{#events}}<tr class="event {{tone}}" data-event="{{event}}">
            <td class="nowrap">{{at}}</td><td>{{label}}</td><td>{{actor}}</td>
            <td>{{#userLink}}<a href="{{userLink}}">{{subject}}</a>{{/userLink}}{{^userLink}}{{subject}}{{/userLink}}</td>
            <td class="mono">{{profile}}</td><td class="detail">{{detail}}</td>
          </tr>
          {{/events}}</tbody>
        </table>{{/hasEvents}}{{^hasEvents}}<p class="muted" id="no-events">No events.</p>{{/hasEvents}}
        """

    static let confirm = """
        <section class="card narrow">
        <h1>{{heading}}</h1>
        <p class="lead">{{question}}</p>
        <p class="warning" role="note">{{consequence}}</p>
        <form method="post" action="/admin/act">
          {{#fields}}<input type="hidden" name="{{name}}" value="{{value}}">
          {{/fields}}<button type="submit" id="confirm" class="danger">{{confirmLabel}}</button>
          <a class="button secondary" id="cancel" href="{{back}}">Cancel</a>
        </form>
        </section>
        """

    static let audit = """
        <section class="card">
        <h1>Audit trail</h1>
        <form class="filters" method="get" action="/admin/audit">
          <div><label for="event">Event</label>
          <select id="event" name="event"><option value="">Any event</option>
          {{#eventOptions}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>
          {{/eventOptions}}</select></div>
          <div><label for="subject">User</label>
          <input id="subject" name="subject" type="text" value="{{subject}}" maxlength="254" placeholder="ann@example.com"></div>
          <div><label for="operator-filter">Operator</label>
          <input id="operator-filter" name="operator" type="text" value="{{operator}}" maxlength="254" placeholder="alice@example.com"></div>
          <div><label for="since">From (UTC)</label>
          <input id="since" name="since" type="datetime-local" value="{{since}}"></div>
          <div><label for="until">Until (UTC)</label>
          <input id="until" name="until" type="datetime-local" value="{{until}}"></div>
          {{#identityProvider}}<input type="hidden" name="identity_provider" value="{{identityProvider}}">{{/identityProvider}}
          {{#profile}}<input type="hidden" name="profile" value="{{profile}}">{{/profile}}
          <div class="go"><button type="submit" id="filter">Show</button></div>
        </form>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        {{> events}}
        <p class="pager">{{#newest}}<a href="{{newest}}" id="newest">Newest events</a>{{/newest}}
        {{#older}}<a href="{{older}}" id="older">Older events</a>{{/older}}</p>
        </section>
        """

    /// The style sheet at ``AdminConsole/stylePath``.
    static let style = """
        :root { color-scheme: light; --accent: #2f5bea; --ink: #1c2333; --muted: #55607a; --line: #e2e7f0; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
               background: #f3f5f9; color: var(--ink); }
        header.bar { display: flex; align-items: center; gap: 1.5rem; padding: .7rem 1.5rem; background: #fff;
                     border-bottom: 1px solid var(--line); flex-wrap: wrap; }
        a.brand { display: flex; align-items: center; gap: .55rem; font-weight: 650; color: var(--ink);
                  text-decoration: none; }
        a.brand span { display: inline-grid; place-items: center; width: 1.9rem; height: 1.9rem; border-radius: 8px;
                       background: var(--accent); color: #fff; font-weight: 700; }
        nav { display: flex; gap: 1rem; }
        nav a { color: var(--muted); text-decoration: none; padding: .3rem .1rem; border-bottom: 2px solid transparent; }
        nav a[aria-current=page] { color: var(--ink); border-bottom-color: var(--accent); }
        form.who { margin-left: auto; display: flex; align-items: center; gap: .75rem; color: var(--muted); }
        main { width: min(96vw, 1100px); margin: 1.5rem auto; }
        .card { background: #fff; border-radius: 12px; padding: 1.25rem 1.5rem; margin-bottom: 1rem;
                box-shadow: 0 4px 16px rgba(20, 30, 60, .08); }
        .card.narrow { max-width: 560px; margin: 3rem auto; }
        h1 { font-size: 1.4rem; margin: 0 0 .5rem; } h2 { font-size: 1.15rem; margin: 0 0 .75rem; }
        h2 small { font-weight: 400; color: var(--muted); margin-left: .4rem; }
        h3 { font-size: .95rem; margin: 1.1rem 0 .4rem; color: var(--muted); text-transform: uppercase;
             letter-spacing: .04em; }
        p.lead { color: var(--muted); margin: 0 0 .75rem; }
        .crumbs { color: var(--muted); margin: 0 0 .6rem; } .crumbs a { color: var(--accent); }
        label { display: block; font-weight: 600; margin: 0 0 .3rem; }
        input[type=search], input[type=text], input[type=datetime-local], select {
               width: 100%; padding: .55rem .65rem; border: 1px solid #c9d0de; border-radius: 8px; font: inherit;
               background: #fff; }
        .row { display: flex; gap: .6rem; } .row input { flex: 1; } form.search { margin-bottom: 1rem; }
        button, a.button { display: inline-block; padding: .55rem 1rem; border: 0; border-radius: 8px;
               background: var(--accent); color: #fff; font: inherit; font-weight: 600; cursor: pointer;
               text-decoration: none; }
        button.secondary, a.button.secondary { background: #e7ebf3; color: var(--ink); }
        button.danger { background: #c62828; }
        button.small { padding: .25rem .6rem; font-size: .85rem; }
        button.link { background: none; color: var(--accent); padding: 0; font-weight: 500; }
        input:focus, button:focus, select:focus, a:focus { outline: 3px solid rgba(47, 91, 234, .35); outline-offset: 1px; }
        table { width: 100%; border-collapse: collapse; margin: .25rem 0 .5rem; }
        caption { text-align: left; color: var(--muted); padding-bottom: .4rem; }
        th, td { text-align: left; padding: .45rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { font-size: .8rem; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
        td.mono, dd.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .85rem; }
        td.nowrap { white-space: nowrap; } td.detail { color: var(--muted); font-size: .85rem; }
        tr.event.bad td:nth-child(2) { color: #a11d1d; font-weight: 600; }
        tr.event.admin td:nth-child(2) { color: #6a3fb0; font-weight: 600; }
        dl.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: .5rem 1.5rem;
                   margin: 0 0 .5rem; }
        dl.facts dt { font-size: .8rem; color: var(--muted); } dl.facts dd { margin: 0; }
        dd.warn { color: #a11d1d; font-weight: 700; }
        .actions { display: flex; flex-wrap: wrap; gap: .5rem; }
        .filters { display: grid; grid-template-columns: repeat(auto-fit, minmax(180px, 1fr)); gap: .75rem;
                   align-items: end; margin-bottom: 1rem; }
        .error { background: #fdecec; color: #8a1c1c; border-radius: 8px; padding: .6rem .75rem; }
        .notice { background: #e8f4ec; color: #1d5b32; border-radius: 8px; padding: .6rem .75rem; }
        .warning { background: #fff4e0; color: #7a4b00; border-radius: 8px; padding: .6rem .75rem; }
        .muted { color: var(--muted); }
        .pager { display: flex; gap: 1.25rem; } .pager a { color: var(--accent); }
        .hidden { position: absolute; left: -10000px; }
        td a, .user-link { color: var(--accent); }
        footer { text-align: center; color: #7a859c; font-size: .8rem; margin: 1rem 0 2rem; }
        """
}
