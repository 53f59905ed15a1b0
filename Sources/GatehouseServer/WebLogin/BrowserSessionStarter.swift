/// A sign-in session in the browser that the token server starts when an app's one-time login
/// token is redeemed (app-to-web single sign-on), so the web applications that trust the hosted
/// login find the user signed in there. The hosted login (`GatehouseLogin.LoginServer`) is one;
/// the server uses the first mounted extension that is.
public protocol BrowserSessionStarter: Sendable {
    /// Starts a session for the app's user (`subject` at `identityProvider`), ending the one the
    /// browser had (`cookies`: the request's `Cookie` header); returns the `Set-Cookie` value.
    func startBrowserSession(subject: String, identityProvider: String, cookies: String?) async throws -> String
}
