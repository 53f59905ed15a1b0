import Foundation
import GatehouseKernel
import GatehouseProtocol
import Logging

extension TokenServer {
    /// Every endpoint the token server serves, by path and method (docs/openapi.yaml describes
    /// them). A served path asked with another method answers 405 with `Allow`.
    static let routes: RouteTable<TokenServer> = {
        var table = RouteTable<TokenServer>()
        // Operations
        table.add("GET", Endpoint.health) { server, _ in try server.json(["status": "ok"]) }
        table.add("GET", Endpoint.ready) { server, _ in try await server.readiness() }
        // Installations
        table.add("GET", Endpoint.configuration) { server, _ in try server.json(server.serverConfiguration()) }
        table.add("POST", Endpoint.clients) { try await $0.registerClient($1) }
        // Flows
        table.add("POST", Endpoint.registration) { try await $0.startRegistration($1) }
        table.add("POST", Endpoint.authentication) { try await $0.startAuthentication($1) }
        table.add("POST", Endpoint.changePin) { try await $0.startChangePin($1) }
        table.add("POST", Endpoint.authenticatorRegistration) { try await $0.startAuthenticatorRegistration($1) }
        table.add(prefix: Endpoint.flowPrefix) { server, request, id in
            try server.require("POST", request)
            return try await server.flowMessage(id: id, request)
        }
        // Tokens and the user's resources
        table.add("POST", Endpoint.token) { try await $0.token($1) }
        table.add("POST", Endpoint.revoke) { try await $0.revoke($1) }
        table.add("POST", Endpoint.introspect) { try await $0.introspect($1) }
        table.add("GET", Endpoint.metadata) { server, _ in try server.json(server.metadata()) }
        table.add("POST", Endpoint.deregister) { try await $0.deregister($1) }
        table.add("GET", Endpoint.profileResource) { try await $0.profileResource($1) }
        table.add("GET", Endpoint.authenticators) { try await $0.listAuthenticators($1) }
        table.add("POST", Endpoint.authenticatorDeregistration) { try await $0.deregisterAuthenticator($1) }
        // App-to-web single sign-on: the page that asks to continue, and its form
        table.add("POST", Endpoint.webLogin) { try await $0.issueWebLogin($1) }
        table.add("GET", Endpoint.webSignIn) { try await $0.webSignInPage($1) }
        table.add("POST", Endpoint.webSignIn) { try await $0.redeemWebLogin($1) }
        table.add("GET", Endpoint.webSession) { try await $0.webSessionPage($1) }
        // Mobile authentication: the device's side, then the portal's
        table.add("POST", Endpoint.mobileAuthEnrolment) { try await $0.enrolMobileAuth($1) }
        table.add("GET", Endpoint.mobileAuthStatus) { try await $0.mobileAuthStatus($1) }
        table.add("POST", Endpoint.pushEnrolment) { try await $0.enrolPush($1) }
        table.add("POST", Endpoint.pushToken) { try await $0.enrolPush($1) }
        table.add("GET", Endpoint.mobileAuthPending) { try await $0.pendingMobileAuth($1) }
        table.add("GET", Endpoint.mobileAuthEvents) { try await $0.mobileAuthEvents($1) }
        table.add("POST", Endpoint.mobileAuthOTP) { try await $0.claimOTPMobileAuth($1) }
        table.add(prefix: Endpoint.mobileAuthTransactionPrefix) { server, request, rest in
            // `{transactionID}` (its payload) or `{transactionID}/answer`; anything else is no transaction.
            let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
            guard (16...64).contains(parts[0].utf8.count), Data(base64URLEncoded: parts[0]) != nil,
                parts.count == 1 || (parts.count == 2 && parts[1] == "answer")
            else { throw ServerError(MobileAuthRequestError(.notFound), status: 404) }
            if parts.count == 1 {
                try server.require("GET", request)
                return try await server.mobileAuthPayload(String(parts[0]), request)
            }
            try server.require("POST", request)
            return try await server.answerMobileAuth(String(parts[0]), request)
        }
        table.add("POST", Endpoint.portalMobileAuth) { try await $0.startPortalMobileAuth($1) }
        table.add(prefix: Endpoint.portalMobileAuth + "/") { server, request, id in
            try server.require("GET", request)
            return try await server.portalTransaction(id, request)
        }
        // The admin API
        table.add("GET", Endpoint.adminUsers) { try await $0.adminFindUsers($1) }
        table.add("GET", Endpoint.adminUser) { try await $0.adminUser($1) }
        table.add("GET", Endpoint.adminAudit) { try await $0.adminAudit($1) }
        table.add("GET", Endpoint.adminAuditExport) { try await $0.adminAuditExport($1) }
        table.add(prefix: Endpoint.adminProfilesPrefix) { try await $0.adminProfile($1, rest: $2) }
        return table
    }()
}
