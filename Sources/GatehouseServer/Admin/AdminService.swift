import Foundation
import GatehouseKernel
import Logging

/// An extension that needs the operators' side of the token server (an admin console): the
/// token server hands it ``AdminService`` once it is built, since the extension is made first.
public protocol AdminServiceExtension: ServerExtension {
    /// Called once, when the token server mounting the extension is built.
    func mounted(with admin: AdminService)
}

/// The operators' side of a token server: find users, read their profiles, devices, sessions and
/// audit trail, and revoke, disenrol or deregister. ``TokenServer/admin`` hands it out; the
/// admin API (`/v1/admin/…`) and the admin console both go through it.
///
/// Every change names who makes it (``AdminActor``) and writes its audit event in the same
/// transaction: the change and its trace are stored together or not at all, and no admin action
/// removes events (only the retention sweep does, `server.audit.retentionDays`).
public struct AdminService: Sendable {
    let store: ServerStore
    let pinAuthenticator: String
    let allowClearingLockouts: Bool
    let clock: any WallClock
    let audit: Logger
    /// Sends the portals' callbacks now due: disenrolling and deregistering end transactions.
    let callbacksDue: @Sendable () -> Void

    private var now: Double { clock.now.timeIntervalSince1970 }

    /// Whether admins may clear a profile's count of failed attempts on this server.
    public var clearsLockouts: Bool { allowClearingLockouts }

    /// The users `search` finds, by subject; throws ``AdminError/searchNeedsAFilter`` without a filter.
    public func findUsers(_ search: UserSearch) async throws -> [UserSummary] {
        guard search.isNarrowed else { throw AdminError.searchNeedsAFilter }
        return try await store.findUsers(search)
    }

    /// The user's profiles and pending transactions; nil when the user has no profile.
    public func user(identityProvider: String, subject: String) async throws -> UserDetail? {
        try await store.userDetail(identityProvider: identityProvider, subject: subject, now: now)
    }

    /// Revokes every session of the profile; returns how many were active.
    @discardableResult
    public func revokeSessions(profileID: String, by actor: AdminActor) async throws -> Int {
        let revoked = try await store.adminRevokeSessions(profileID, by: actor, now: now)
        log("Sessions revoked by an admin", .adminRevokeSessions, profileID, actor, ["sessions": "\(revoked)"])
        return revoked
    }

    /// Removes one authenticator of the profile; the PIN cannot be removed.
    public func removeAuthenticator(_ authenticator: String, profileID: String, by actor: AdminActor) async throws {
        try await store.adminRemoveAuthenticator(
            authenticator,
            profileID: profileID,
            pinAuthenticator: pinAuthenticator,
            by: actor,
            now: now
        )
        log(
            "Authenticator removed by an admin",
            .adminRemoveAuthenticator,
            profileID,
            actor,
            ["authenticator": "\(authenticator)"]
        )
    }

    /// Disenrols the profile's device from mobile authentication: no more pushes reach it, and
    /// the app learns it on its next request.
    public func disenrolDevice(profileID: String, by actor: AdminActor) async throws {
        try await store.adminDisenrolDevice(profileID, by: actor, now: now)
        callbacksDue()
        log("Device disenrolled by an admin", .adminDisenrolDevice, profileID, actor)
    }

    /// Deregisters the profile: it, its authenticators and sessions go, and the app's next
    /// request gets the deregistration error.
    public func deregisterProfile(profileID: String, by actor: AdminActor) async throws {
        try await store.adminDeregisterProfile(profileID, by: actor, now: now)
        callbacksDue()
        log("Profile deregistered by an admin", .adminDeregisterProfile, profileID, actor)
    }

    /// Sets the profile's count of failed attempts back to zero, where the manifest allows it.
    public func clearLockout(profileID: String, by actor: AdminActor) async throws {
        guard allowClearingLockouts else { throw AdminError.clearingLockoutsNotAllowed }
        try await store.adminClearLockout(profileID, by: actor, now: now)
        log("Failed attempts cleared by an admin", .adminClearLockout, profileID, actor)
    }

    /// Records, inside `db` (the console's transaction that starts the operator's session), that
    /// the operator `subject` signed in to the admin console (`acr`: how): the event is stored
    /// exactly when the session is. Call ``operatorSignedIn(_:)`` once that transaction committed.
    public func recordOperatorSignIn(_ subject: String, acr: String?, in db: any SQLSession) throws {
        var detail: [String: String] = [:]
        if let acr { detail["acr"] = String(acr.prefix(128)) }
        try store.appendAudit(
            [AuditEntry(event: .operatorSignIn, actor: .consoleOperator(String(subject.prefix(256))), detail: detail)],
            now: now,
            db
        )
    }

    /// Writes the audit log's line for a sign-in ``recordOperatorSignIn(_:acr:in:)`` stored.
    public func operatorSignedIn(_ subject: String) {
        audit.notice(
            "Operator signed in to the admin console",
            metadata: ["event": "\(AuditEvent.operatorSignIn.rawValue)", "actor": "operator:\(subject.prefix(256))"]
        )
    }

    /// Records that the console refused a verified sign-in by `subject` (`reason`: why, in a few
    /// words). The server is the actor: whoever was refused is no operator of the trail, and is
    /// named as the event's subject.
    public func recordRefusedOperatorSignIn(_ subject: String, acr: String?, reason: String) async throws {
        var detail = ["reason": String(reason.prefix(128))]
        if let acr { detail["acr"] = String(acr.prefix(128)) }
        try await store.appendAudit(
            [
                AuditEntry(
                    event: .operatorSignInRefused,
                    actor: .server,
                    subject: String(subject.prefix(256)),
                    detail: detail
                )
            ],
            now: now
        )
        audit.notice(
            "Operator sign-in refused",
            metadata: ["event": "\(AuditEvent.operatorSignInRefused.rawValue)", "actor": "\(AdminActor.server)"]
        )
    }

    /// Records, inside `db` (the hosted login's transaction that adds or removes the passkey),
    /// that the login's user `subject` added or removed a passkey (`detail`: its name, how the
    /// session signed in): a passkey is a way in, to the admin console too, so each is traced.
    public func recordPasskeyChange(
        added: Bool,
        subject: String,
        detail: [String: String],
        in db: any SQLSession
    ) throws {
        try store.appendAudit(
            [
                AuditEntry(
                    event: added ? .passkeyAdded : .passkeyRemoved,
                    actor: .user,
                    subject: String(subject.prefix(256)),
                    detail: detail.mapValues { String($0.prefix(128)) }
                )
            ],
            now: now,
            db
        )
    }

    /// A page of the audit trail, newest first.
    public func auditEvents(_ query: AuditQuery) async throws -> AuditPage {
        try await store.auditEvents(query)
    }

    /// Up to `limit` events `query` selects after the event `after` (0: from the oldest), oldest
    /// first: for an export in pages.
    public func exportAuditEvents(_ query: AuditQuery, after: Int64, limit: Int) async throws -> [AuditRecord] {
        try await store.exportAuditEvents(query, after: after, limit: min(max(limit, 1), 10_000))
    }

    private func log(
        _ message: Logger.Message,
        _ event: AuditEvent,
        _ profileID: String,
        _ actor: AdminActor,
        _ extra: Logger.Metadata = [:]
    ) {
        audit.notice(
            message,
            metadata: ["event": "\(event.rawValue)", "profile": "\(profileID)", "actor": "\(actor)"].merging(extra) {
                $1
            }
        )
    }
}

extension TokenServer {
    /// The operators' side of this server: what the admin API and an admin console use.
    public var admin: AdminService {
        AdminService(
            store: store,
            pinAuthenticator: pinAuthenticator.descriptor.id,
            allowClearingLockouts: configuration.admin.allowClearingLockouts,
            clock: clock,
            audit: audit,
            callbacksDue: { [callbacks] in callbacks?.wake() }
        )
    }
}
