import Foundation
public import GatehouseProtocol
import HTTPTypes
public import Hummingbird
import NIOCore

/// A request context that carries the access a ``GatehouseAccessMiddleware`` verified.
public protocol GatehouseRequestContext: RequestContext {
    /// Set by the middleware before the route runs.
    var access: VerifiedAccess? { get set }
}

/// A ready-made ``GatehouseRequestContext`` for applications with no context of their own.
public struct GatehouseAccessContext: GatehouseRequestContext {
    /// Hummingbird's own request state.
    public var coreContext: CoreRequestContextStorage
    /// Who the request acts for, set by the middleware; `nil` on routes it does not protect.
    public var access: VerifiedAccess?

    /// Creates the context for a request, with no access verified yet.
    public init(source: Source) {
        coreContext = .init(source: source)
        access = nil
    }
}

/// Protects the routes behind it: every request must carry a valid DPoP-bound Gatehouse token
/// that meets `requirement`; the route finds who it acts for in `context.access`. A refused
/// request never reaches the route and gets the challenge RFC 6750 and RFC 9449 describe.
///
/// ```swift
/// let validator = AccessValidator(
///     introspector: try HTTPIntrospection(tokenServer: url, resourceServerID: "gateway", secret: secret),
///     publicURL: "https://api.example.com"
/// )
/// router.group("account")
///     .add(middleware: GatehouseAccessMiddleware(validator, requirement: .init(scopes: ["read"])))
///     .get { _, context in "Hello, \(context.access?.subject ?? "")" }
/// ```
public struct GatehouseAccessMiddleware<Introspector: TokenIntrospecting, Context: GatehouseRequestContext>:
    RouterMiddleware
{
    /// The validator that checks each request's token and proof.
    public let validator: AccessValidator<Introspector>
    /// What the routes behind the middleware ask of the token: its scopes and kinds.
    public let requirement: AccessValidator<Introspector>.Requirement

    /// Protects routes with `validator`, asking `requirement` of each token (default: a user's session).
    public init(
        _ validator: AccessValidator<Introspector>,
        requirement: AccessValidator<Introspector>.Requirement = .init()
    ) {
        self.validator = validator
        self.requirement = requirement
    }

    /// Validates the request and runs the route with ``GatehouseRequestContext/access`` set, adding a fresh
    /// `DPoP-Nonce` when nonces are on; a refusal answers at once, with its status, `WWW-Authenticate` challenge and
    /// JSON error body.
    public func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let access: VerifiedAccess
        do throws(AccessRefusal) {
            access = try await validator.validate(
                method: request.method.rawValue,
                path: request.uri.path,
                header: { name in HTTPField.Name(name).flatMap { request.headers[values: $0].last } },
                requirement: requirement
            )
        } catch {
            return Self.response(error)
        }
        var context = context
        context.access = access
        var response = try await next(request, context)
        if let nonce = validator.currentNonce(), let name = HTTPField.Name("DPoP-Nonce") {
            response.headers[name] = nonce
        }
        return response
    }

    static func response(_ refusal: AccessRefusal) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        headers[.wwwAuthenticate] = refusal.challenge
        if let nonce = refusal.nonce, let name = HTTPField.Name("DPoP-Nonce") { headers[name] = nonce }
        var body: [String: String] = ["error_description": refusal.message]
        if let error = refusal.error { body["error"] = error }
        let data = (try? WireCoding.encode(body)) ?? Data()
        return Response(
            status: HTTPResponse.Status(code: refusal.status),
            headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data))
        )
    }
}
