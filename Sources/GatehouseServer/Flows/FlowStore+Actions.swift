import Foundation
import GatehouseKernel
import GatehouseProtocol

// How the store carries out the flow machine's actions: the only place flows change profiles,
// counters, registrations and tokens.

extension ServerStore {
    // MARK: - Applying the machine's actions

    /// Applies `actions` in order, inside the caller's transaction. The only place flows change
    /// profiles, counters, registrations and tokens.
    func apply(
        _ actions: [FlowAction],
        to row: inout FlowRow,
        now: Double,
        _ db: any SQLSession,
        answerRequired: Bool = true
    ) throws -> FlowApplied {
        var outcome: FlowApplied.Outcome?
        var tokens: TokenResponse?
        var ended = false
        var events: [FlowEvent] = []
        var owner: (identityProvider: String, subject: String)?
        var transactionDecision: AuditEntry?
        for action in actions {
            switch action {
            case .reserveAttempt, .releaseAttempt:
                // A hold is the flow's own `attempt` column, written with the flow's state.
                break
            case .commitAttempt, .countFailure:
                try db.execute(
                    sql: "UPDATE profiles SET failures = failures + 1 WHERE id = ?",
                    arguments: [row.profileID]
                )
            case .attemptFailed(let authenticator):
                events.append(.attemptFailed(authenticator: authenticator))
            case .resetFailures:
                try db.execute(sql: "UPDATE profiles SET failures = 0 WHERE id = ?", arguments: [row.profileID])
            case .identifyUser(let identity):
                try identify(identity, row: &row, now: now, db)
                // The actions that follow in this step (a registration with nothing to enrol ends
                // here) read the user from the row, not from a saved state.
                row.state.subject = identity.subject
                row.state.grant = identity.grant
            case .createProfile:
                try createProfile(row, now: now, db)
                events.append(.profileCreated)
            case .storeRegistration(let authenticator, let data) where row.state.plan.kind == .authenticatorRegistration:
                // A new authenticator: if an overlapping registration stored it first, refuse.
                do {
                    try db.execute(
                        sql:
                            "INSERT INTO registrations (profile_id, authenticator, data, created_at) VALUES (?, ?, ?, ?)",
                        arguments: [row.profileID, authenticator, data, now]
                    )
                } catch is UniqueConstraintViolation {
                    throw StoreRefusal.conflict(AuthenticationError(.authenticatorAlreadyRegistered))
                }
                events.append(.registrationStored(authenticator: authenticator))
            case .storeRegistration(let authenticator, let data):
                try db.execute(
                    sql: """
                        INSERT INTO registrations (profile_id, authenticator, data, created_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT(profile_id, authenticator) DO UPDATE SET data = excluded.data, created_at = excluded.created_at
                        """,
                    arguments: [row.profileID, authenticator, data, now]
                )
                events.append(.registrationStored(authenticator: authenticator))
            case .removeRegistration(let authenticator):
                try db.execute(
                    sql: "DELETE FROM registrations WHERE profile_id = ? AND authenticator = ?",
                    arguments: [row.profileID, authenticator]
                )
                events.append(.registrationRemoved(authenticator: authenticator))
            case .deregister:
                // The machine deregisters only at the maximum: a lockout, reported by the change
                // that removed the profile, so once however many requests reached it together.
                // Its owner is read first, for the audit trail.
                if let profileID = row.profileID, owner == nil { owner = try profileOwner(profileID, db) }
                if let profileID = row.profileID, try deleteProfile(profileID, now: now, db) {
                    var authenticator: String?
                    if case .authenticate(let id) = row.state.stage { authenticator = id }
                    events.append(.lockedOut(authenticator: authenticator))
                }
            case .issueTokens:
                tokens = try issueTokens(for: row, now: now, db)
            case .revokeUser(let subject, let grant):
                // What the replayed credential issued; without a named credential, every session
                // of this provider's user, whichever device holds it.
                try db.execute(
                    sql: """
                        UPDATE families SET revoked = TRUE WHERE (CAST(? AS TEXT) IS NULL OR "grant" = ?) AND profile_id IN
                            (SELECT id FROM profiles WHERE identity_provider = ? AND subject = ?)
                        """,
                    arguments: [grant, grant, row.identityProvider, subject]
                )
                // A session its first redeemer finishes later is refused too: remembered longer
                // than any flow that redeemed it may run (flows live an hour at most).
                if let grant {
                    try db.execute(
                        sql: #"""
                            INSERT INTO replayed_grants ("grant", expires_at) VALUES (?, ?)
                            ON CONFLICT ("grant") DO NOTHING
                            """#,
                        arguments: [grant, now + 2 * 3600]
                    )
                }
                try activeTokens.evictOnCommit(.all, db)
                events.append(.userSessionsRevoked)
            case .approveTransaction:
                try approveTransaction(for: row, now: now, db)
                transactionDecision = AuditEntry(
                    event: .pushApproved,
                    actor: .user,
                    detail: ["transaction": row.transactionID ?? ""]
                )
            case .denyTransaction(let refused):
                try flowEndedWithoutApproval(row, refused: refused, now: now, db)
                transactionDecision = AuditEntry(
                    event: .pushDenied,
                    actor: .user,
                    detail: ["transaction": row.transactionID ?? "", "reason": "\(refused)"]
                )
            case .saveFlow(let state):
                if state.attempt == .held, row.state.attempt != .held { row.heldUntil = now + Self.holdLifetime }
                if state.attempt != .held { row.heldUntil = nil }
                row.state = state
                try db.execute(
                    sql: """
                        UPDATE flows SET state = ?, attempt = ?, held_until = ?, profile_id = ?, subject = ? WHERE id = ?
                        """,
                    arguments: [
                        try WireCoding.encode(state), state.attempt.rawValue, row.heldUntil, row.profileID,
                        state.subject, row.id,
                    ]
                )
            case .endFlow:
                try db.execute(sql: "DELETE FROM flows WHERE id = ?", arguments: [row.id])
                ended = true
                events.append(.ended)
            case .reply(let reply):
                outcome = .reply(reply)
            case .refuse(let refusal):
                outcome = .refusal(refusal)
            }
        }
        try auditFlowStep(
            events,
            row: row,
            loggedIn: tokens != nil && row.state.plan.kind == .authentication,
            decision: transactionDecision,
            owner: owner,
            now: now,
            db
        )
        guard let outcome else {
            guard answerRequired else {
                return FlowApplied(
                    flowID: row.id,
                    profileID: row.profileID,
                    outcome: .reply(FlowReply(stage: row.state.stage)),
                    kind: row.state.plan.kind,
                    events: events
                )
            }
            throw StoreRefusal.inconsistent("The flow produced no answer.")
        }
        return FlowApplied(
            flowID: row.id,
            profileID: row.profileID,
            outcome: outcome,
            tokens: tokens,
            endedTransaction: ended ? row.transactionID : nil,
            kind: row.state.plan.kind,
            subject: events.contains(.profileCreated) ? row.state.subject : nil,
            events: events
        )
    }

    /// Writes what a flow step changed to the audit trail, in the step's transaction.
    private func auditFlowStep(
        _ events: [FlowEvent],
        row: FlowRow,
        loggedIn: Bool,
        decision: AuditEntry?,
        owner known: (identityProvider: String, subject: String)?,
        now: Double,
        _ db: any SQLSession
    ) throws {
        let kind = row.state.plan.kind.rawValue
        var entries: [AuditEntry] = []
        func add(_ event: AuditEvent, _ actor: AdminActor = .user, _ detail: [String: String] = [:]) {
            entries.append(AuditEntry(event: event, actor: actor, detail: detail.merging(["flow": kind]) { $1 }))
        }
        for event in events {
            switch event {
            case .profileCreated: add(.registration, .user, ["installation": row.clientID])
            case .attemptFailed(let authenticator): add(.loginFailure, .user, ["authenticator": authenticator])
            case .lockedOut(let authenticator):
                add(.lockout, .server, authenticator.map { ["authenticator": $0] } ?? [:])
            case .registrationRemoved(let authenticator):
                add(.authenticatorLockout, .server, ["authenticator": authenticator])
            case .registrationStored(let authenticator) where row.state.plan.kind == .changePin:
                add(.pinChange, .user, ["authenticator": authenticator])
            case .registrationStored(let authenticator) where row.state.plan.kind == .authenticatorRegistration:
                add(.authenticatorRegistration, .user, ["authenticator": authenticator])
            case .userSessionsRevoked: add(.credentialReplay, .server)
            default: break
            }
        }
        if loggedIn { add(.login) }
        if var decision {
            decision.detail["flow"] = kind
            entries.append(decision)
        }
        guard !entries.isEmpty else { return }
        var owner = known
        if owner == nil, let profileID = row.profileID { owner = try profileOwner(profileID, db) }
        if owner == nil, let provider = row.identityProvider, let subject = row.state.subject {
            owner = (provider, subject)
        }
        for index in entries.indices {
            entries[index].identityProvider = owner?.identityProvider
            entries[index].subject = owner?.subject
            entries[index].profileID = row.profileID
        }
        try appendAudit(entries, now: now, db)
    }

    /// The identity provider named the user: reuse the profile this client already has for that
    /// user, or allocate a new id. Of two registrations of one user at once, the newer goes on.
    private func identify(_ identity: RegisteredIdentity, row: inout FlowRow, now: Double, _ db: any SQLSession) throws
    {
        // On PostgreSQL, identifications of one user on one installation take turns (a lock held
        // until commit), so the second sees the first's flow and ends it.
        if db.dialect == .postgres {
            try db.execute(
                sql: "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                arguments: ["identify \(row.clientID) \(row.identityProvider ?? "") \(identity.subject)"]
            )
        }
        // A newer registration of the same user on this installation supersedes an open one (an
        // app killed mid-registration, a command interrupted): the older flow is ended, and its
        // next step learns it is gone, rather than the user waiting for it to expire. (Only
        // registration flows name an identity provider.) One holding an attempt is not ended:
        // that would hand its guess back uncounted; the newer one waits for it instead.
        try db.execute(
            sql: """
                DELETE FROM flows WHERE id != ? AND client_id = ? AND identity_provider = ? AND subject = ?
                    AND attempt = 'none'
                """,
            arguments: [row.id, row.clientID, row.identityProvider, identity.subject]
        )
        let overlapping = try Bool.fetchOne(
            db,
            sql: """
                SELECT 1 FROM flows WHERE id != ? AND client_id = ? AND identity_provider = ? AND subject = ? AND expires_at > ?
                """,
            arguments: [row.id, row.clientID, row.identityProvider, identity.subject, now]
        )
        guard overlapping != true else {
            throw StoreRefusal.registrationInProgress(
                "Another registration of this user is checking an answer on this device; try again in a moment."
            )
        }
        // A stateless registration never takes over the user's stored profile.
        let existing =
            row.stateless
            ? nil
            : try String.fetchOne(
                db,
                sql: """
                    SELECT id FROM profiles WHERE client_id = ? AND identity_provider = ? AND subject = ? AND stateless = FALSE
                    """,
                arguments: [row.clientID, row.identityProvider, identity.subject]
            )
        row.profileID = try existing ?? newProfileID(db)
    }

    private func newProfileID(_ db: any SQLSession) throws -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let id = String((0..<6).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
            let taken = try Bool.fetchOne(
                db,
                sql: "SELECT 1 FROM profiles WHERE id = ? UNION SELECT 1 FROM flows WHERE profile_id = ?",
                arguments: [id, id]
            )
            if taken != true { return id }
        }
        throw StoreRefusal.busy("Could not allocate a profile id; try again.")
    }

    /// Writes the registered profile. A re-registration replaces the device key, so the old
    /// profile's sessions and registrations end.
    private func createProfile(_ row: FlowRow, now: Double, _ db: any SQLSession) throws {
        guard let profileID = row.profileID, let subject = row.state.subject,
            let identityProvider = row.identityProvider, let profileKey = row.profileKey
        else { throw StoreRefusal.inconsistent("The registration flow is incomplete.") }
        // A re-registration replaces the profile's key: nothing may use the old one meanwhile.
        try lockProfile(profileID, db)
        try db.execute(sql: "DELETE FROM families WHERE profile_id = ?", arguments: [profileID])
        try activeTokens.evictOnCommit(.profile(profileID), db)
        try db.execute(sql: "DELETE FROM registrations WHERE profile_id = ?", arguments: [profileID])
        // A stateless profile lasts as long as its session can; a stored one its application's
        // registration validity (a new registration starts the period again).
        let appID = try String.fetchOne(
            db,
            sql: "SELECT app_id FROM clients WHERE id = ?",
            arguments: [row.clientID]
        )
        let lifetime = row.stateless ? tokenLifetimes.refresh : appID.flatMap { registrationValidity[$0] }
        let expiresAt = lifetime.map { now + Double($0) }
        do {
            try db.execute(
                sql: """
                    INSERT INTO profiles (id, client_id, identity_provider, subject, scope, key_thumbprint, failures,
                        created_at, expires_at, stateless)
                    VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET scope = excluded.scope, key_thumbprint = excluded.key_thumbprint,
                        failures = 0, expires_at = excluded.expires_at
                    """,
                arguments: [
                    profileID, row.clientID, identityProvider, subject, row.scope, profileKey, now, expiresAt,
                    row.stateless,
                ]
            )
        } catch is UniqueConstraintViolation {
            throw StoreRefusal.registrationInProgress(
                "This user was registered on this device by another registration meanwhile; authenticate instead."
            )
        }
    }

    /// Removes a profile and everything that hangs off it: registrations and tokens. Its open
    /// flows stay until used or expired, so a request in flight learns the user was deregistered.
    /// Returns whether this change removed it (false: it was gone already).
    @discardableResult
    func deleteProfile(_ profileID: String, now: Double, _ db: any SQLSession) throws -> Bool {
        try endTransactions(askedOf: profileID, .deregistered, now: now, db)
        try db.execute(sql: "DELETE FROM profiles WHERE id = ?", arguments: [profileID])
        let removed = db.changesCount > 0
        try activeTokens.evictOnCommit(.profile(profileID), db)
        // Its events channels, on whichever instance, look again, find it gone, and end.
        try db.announce(EventChannelHub.wakeAnnouncement(profileID))
        return removed
    }
}
