import Foundation
import GatehouseKernel
import GatehouseProtocol

extension ServerStore {
    // MARK: - Starting

    /// Starts a registration for a registered client.
    func startRegistration(_ flow: FlowRow, proof: ProofUse) async throws -> FlowApplied {
        try await write { db in
            try self.record(proof, db)
            // On PostgreSQL the janitor alone sweeps them: concurrent registrations would wait for
            // each other over the same expired rows.
            if db.dialect == .sqlite {
                try db.execute(sql: "DELETE FROM flows WHERE expires_at < ?", arguments: [proof.now - 3600])
            }
            let (machine, actions) = FlowMachine.start(flow.state.plan, counter: nil)
            var row = flow
            row.state = machine.state
            try self.insert(row, db)
            return try self.apply(actions, to: &row, now: proof.now, db)
        }
    }

    /// Starts a flow for an existing profile, checked against the profile's key and
    /// registrations in the same transaction.
    func startProfileFlow(
        _ flow: FlowRow,
        requirement: RegistrationRequirement,
        proof: ProofUse
    ) async throws -> FlowApplied {
        try await write { db in
            guard let profileID = flow.profileID,
                let profile = try SQLRow.fetchOne(
                    db,
                    sql: "SELECT * FROM profiles WHERE id = ? \(db.dialect.lockingRows)",
                    arguments: [profileID]
                )
            else {
                return FlowApplied(flowID: flow.id, outcome: .refusal(FlowRefusal(GenericError(.userDeregistered))))
            }
            // A registration past its validity is over: the profile goes, the user registers again.
            guard Self.isCurrent(profile, now: proof.now) else {
                try self.deleteProfile(profileID, now: proof.now, db)
                return FlowApplied(
                    flowID: flow.id,
                    outcome: .refusal(
                        FlowRefusal(
                            GenericError(.userDeregistered, message: "The registration expired; register again.")
                        )
                    )
                )
            }
            guard !(profile["stateless"] as Bool) else {
                throw MobileAuthEnrollmentError(
                    .statelessUser,
                    message: "A stateless registration has no authenticators; register again for a new session."
                )
            }
            guard profile["key_thumbprint"] == proof.keyThumbprint else {
                throw StoreRefusal.proof("The DPoP proof is not signed by this profile's key.")
            }
            switch requirement {
            case .registered(let authenticator):
                guard try self.hasRegistration(profileID, authenticator, db) else {
                    throw AuthenticationError(.authenticatorNotRegistered)
                }
            case .notRegistered(let authenticator):
                guard try !self.hasRegistration(profileID, authenticator, db) else {
                    throw StoreRefusal.conflict(AuthenticationError(.authenticatorAlreadyRegistered))
                }
            }
            try self.record(proof, db)
            let (machine, actions) = FlowMachine.start(
                flow.state.plan,
                counter: try self.attempts(profileID, failures: profile["failures"], excluding: nil, now: proof.now, db)
            )
            var row = flow
            row.clientID = profile["client_id"]
            row.scope = profile["scope"]
            row.state = machine.state
            try self.insert(row, db)
            return try self.apply(actions, to: &row, now: proof.now, db)
        }
    }

    // MARK: - Continuing

    /// The flow `id`, if `keyThumbprint` may continue it, with the registration data its
    /// `authenticate` stage needs and the user's subject.
    func flow(
        _ id: String,
        keyThumbprint: String,
        now: Double
    ) async throws -> (
        FlowRow, registration: Data?, subject: String?
    ) {
        // One statement, so one snapshot on either engine and one round trip on PostgreSQL: the
        // flow, its profile's owner, and a row for each of the profile's registrations (a
        // handful), of which the stage's is picked here.
        let rows = try await lookupStatement { db in
            try SQLRow.fetchAll(
                db,
                sql: """
                    SELECT flows.*, profiles.id AS owner_id, profiles.subject AS owner_subject,
                        profiles.key_thumbprint AS owner_key_thumbprint,
                        registrations.authenticator AS registered_authenticator, registrations.data AS registration_data
                    FROM flows
                    LEFT JOIN profiles ON profiles.id = flows.profile_id
                    LEFT JOIN registrations ON registrations.profile_id = flows.profile_id
                    WHERE flows.id = ?
                    """,
                arguments: [id]
            )
        }
        guard let stored = rows.first else { throw StoreRefusal.flowNotFound }
        let flow = try FlowRow(stored)
        guard flow.keyThumbprint == keyThumbprint else {
            throw StoreRefusal.proof("The DPoP proof is not signed by the key that started the flow.")
        }
        guard flow.expiresAt > now else {
            throw StoreRefusal.flowExpired(registration: flow.state.plan.kind == .registration)
        }
        var registration: Data?
        var subject = flow.state.subject
        if flow.state.plan.kind != .registration, flow.profileID != nil {
            guard (stored["owner_id"] as String?) != nil else { throw StoreRefusal.userDeregistered }
            // A flow started with a key the profile no longer has (it was registered again).
            guard stored["owner_key_thumbprint"] == flow.keyThumbprint else {
                throw StoreRefusal.proof("The profile was registered again; this flow's key is no longer its key.")
            }
            subject = stored["owner_subject"]
            // An authentication checks against the registration; an enrolment that replaces
            // one (a PIN change) may keep it until the device shows which it holds.
            switch flow.state.stage {
            case .authenticate(let authenticator), .enrol(let authenticator):
                let registered = rows.first { ($0["registered_authenticator"] as String?) == authenticator }
                registration = registered?["registration_data"] as Data?
            default:
                break
            }
        }
        return (flow, registration, subject)
    }

    /// What happened before a plugin saw a message.
    enum Arrival: Sendable {
        /// Hand the message to the plugin; the flow as it now stands, and whether the request's
        /// proof was already recorded (by the transaction that held the attempt).
        case proceed(FlowRow, proofRecorded: Bool)
        /// The flow ended before the plugin was asked (no attempt left), with what that changed.
        case ended(FlowApplied)
    }

    /// Before a plugin sees a message: holds an attempt when the machine says so.
    func messageArrived(_ flow: FlowRow, proof: ProofUse) async throws -> Arrival {
        guard flow.state.plan.kind != .registration, let profileID = flow.profileID else {
            return .proceed(flow, proofRecorded: false)
        }
        // Only an authenticate stage without a held attempt has anything to apply.
        guard case .authenticate = flow.state.stage, flow.state.attempt == .none else {
            return .proceed(flow, proofRecorded: false)
        }
        return try await write { db in
            var row = flow
            try self.record(proof, db)
            // A profile deregistered since the flow was read has no counter: refuse, never ask the plugin.
            guard let failures = try self.claim(&row, now: proof.now, db) else { throw StoreRefusal.userDeregistered }
            var machine = FlowMachine(state: row.state)
            let counter = try self.attempts(profileID, failures: failures, excluding: row.id, now: proof.now, db)
            let actions = machine.messageArrived(counter: counter)
            let applied = try self.apply(actions, to: &row, now: proof.now, db, answerRequired: false)
            if case .refusal = applied.outcome { return .ended(applied) }
            return .proceed(row, proofRecorded: true)
        }
    }

    /// Applies a plugin's decision about a message.
    /// Applies a plugin's decision about a message, at `now` (after the plugin ran). The answer is
    /// not applied when the flow's hold lapsed meanwhile, nor — for a success — when the
    /// authenticator's registration changed since the plugin read it (`registrationSeen`): a
    /// concurrent success rotated it, or it was deregistered.
    func apply(
        _ outcome: StageOutcome,
        to flow: FlowRow,
        proof: ProofUse,
        proofRecorded: Bool,
        now: Double,
        registrationSeen: Data?
    ) async throws -> FlowApplied {
        try await write { db in
            var row = flow
            if !proofRecorded { try self.record(proof, db) }
            let failures = try self.claim(&row, now: now, db)
            var machine = FlowMachine(state: row.state)
            // The facts the machine rules on: whether the hold lapsed, whether the registration
            // the plugin checked is still the one stored.
            var facts = OutcomeFacts(holdLapsed: row.state.attempt == .held && (row.heldUntil ?? 0) <= now)
            if case .succeeded = outcome, case .authenticate(let id) = row.state.stage, let profileID = row.profileID {
                facts.registrationChanged = try self.registration(profileID, id, db) != registrationSeen
            }
            let actions = machine.apply(
                outcome,
                counter: try self.counter(row, lockedFailures: failures, now: now, db),
                facts: facts
            )
            return try self.apply(actions, to: &row, now: now, db)
        }
    }

    enum FlowControl: Sendable { case cancel, fallBack }

    /// The client cancels the flow or falls back to the PIN.
    func control(_ control: FlowControl, flow: FlowRow, proof: ProofUse) async throws -> FlowApplied {
        try await write { db in
            var row = flow
            try self.record(proof, db)
            let failures = try self.claim(&row, now: proof.now, db)
            var machine = FlowMachine(state: row.state)
            let counter = try self.counter(row, lockedFailures: failures, now: proof.now, db)
            let actions =
                switch control {
                case .cancel: machine.cancel(counter: counter)
                case .fallBack: machine.fallBack(counter: counter)
                }
            return try self.apply(actions, to: &row, now: proof.now, db)
        }
    }

    func insert(_ row: FlowRow, _ db: any SQLSession) throws {
        try db.execute(
            sql: """
                INSERT INTO flows (id, client_id, profile_id, identity_provider, scope, profile_key, key_thumbprint, state,
                    attempt, expires_at, transaction_id, stateless)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                row.id, row.clientID, row.profileID, row.identityProvider, row.scope, row.profileKey, row.keyThumbprint,
                try WireCoding.encode(row.state), row.state.attempt.rawValue, row.expiresAt, row.transactionID,
                row.stateless,
            ]
        )
    }

    /// Claims the flow for this step: succeeds only if nobody moved it on since it was read, so
    /// each step (and each single-use nonce in a session) is used at most once, even by
    /// concurrent requests. Locks the flow's profile and answers its failures (nil without a
    /// profile, or when it is gone), read in the same statement as the lock.
    private func claim(_ row: inout FlowRow, now: Double, _ db: any SQLSession) throws -> Int? {
        try db.execute(
            sql: "UPDATE flows SET version = version + 1 WHERE id = ? AND version = ? AND expires_at > ?",
            arguments: [row.id, row.version, now]
        )
        guard db.changesCount == 1 else {
            throw StoreRefusal.flowTaken
        }
        row.version += 1
        // What this step reads of its profile (the registration it checks an answer against,
        // the attempts in use) must not change under it before it commits.
        guard let profileID = row.profileID else { return nil }
        return try lockedFailures(profileID, db)
    }

    /// On PostgreSQL, locks the profile's row until the change commits: changes about one
    /// profile (its attempts, its registrations) run one after the other, each seeing the
    /// last one's commit. SQLite's changes run one at a time anyway.
    func lockProfile(_ profileID: String, _ db: any SQLSession) throws {
        guard db.dialect == .postgres else { return }
        try db.execute(sql: "SELECT 1 FROM profiles WHERE id = ? FOR NO KEY UPDATE", arguments: [profileID])
    }

    /// Locks the profile's row (``lockProfile(_:_:)``) and reads its failures in the same
    /// statement; nil when the profile is gone.
    func lockedFailures(_ profileID: String, _ db: any SQLSession) throws -> Int? {
        try Int.fetchOne(
            db,
            sql: "SELECT failures FROM profiles WHERE id = ? \(db.dialect.lockingRows)",
            arguments: [profileID]
        )
    }

    /// The profile's counter: its failures, and the attempts other live flows hold.
    func counter(
        _ profileID: String,
        excluding flowID: String?,
        now: Double,
        _ db: any SQLSession
    ) throws
        -> AttemptCounter?
    {
        guard let failures = try lockedFailures(profileID, db) else { return nil }
        return try attempts(profileID, failures: failures, excluding: flowID, now: now, db)
    }

    /// The counter of a profile whose row this change has locked, having read its `failures`
    /// then: the attempts counted here, in a statement after the lock, are the ones every other
    /// change of this profile counts after this one commits.
    func attempts(
        _ profileID: String,
        failures: Int,
        excluding flowID: String?,
        now: Double,
        _ db: any SQLSession
    ) throws -> AttemptCounter {
        let held =
            try Int.fetchOne(
                db,
                sql: """
                    SELECT COUNT(*) FROM flows WHERE profile_id = ? AND attempt = 'held' AND held_until > ? AND id != ?
                    """,
                arguments: [profileID, now, flowID ?? ""]
            ) ?? 0
        return AttemptCounter(failures: failures, held: held, maximum: maxFailures)
    }

    /// The counter of a flow ``claim(_:now:_:)`` claimed, from the failures it read.
    private func counter(
        _ row: FlowRow,
        lockedFailures failures: Int?,
        now: Double,
        _ db: any SQLSession
    ) throws
        -> AttemptCounter?
    {
        guard row.state.plan.kind != .registration, let profileID = row.profileID else { return nil }
        guard let failures else { throw StoreRefusal.userDeregistered }
        return try attempts(profileID, failures: failures, excluding: row.id, now: now, db)
    }

    func registration(_ profileID: String, _ authenticator: String, _ db: any SQLSession) throws -> Data? {
        try Data.fetchOne(
            db,
            sql: "SELECT data FROM registrations WHERE profile_id = ? AND authenticator = ?",
            arguments: [profileID, authenticator]
        )
    }

    func hasRegistration(_ profileID: String, _ authenticator: String, _ db: any SQLSession) throws -> Bool {
        try Bool.fetchOne(
            db,
            sql: "SELECT 1 FROM registrations WHERE profile_id = ? AND authenticator = ?",
            arguments: [profileID, authenticator]
        ) == true
    }
}
