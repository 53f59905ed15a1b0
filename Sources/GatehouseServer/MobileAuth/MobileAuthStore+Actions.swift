import Foundation
import GatehouseKernel
import GatehouseProtocol

// How the store carries out what MobileAuthTransaction decides: the only place a transaction's
// status changes. SQL only; the rules are the machine's.

extension ServerStore {
    /// The columns the machine needs; select them (or `*`) with any row handed to ``transaction(_:)``.
    static let transactionColumns = "status, reason, expires_at, method, number, signing_data_hash, callback_uri"

    /// The machine for a stored transaction row.
    func transaction(_ row: SQLRow) throws -> MobileAuthTransaction {
        guard let state = MobileAuthTransaction.State(status: row["status"], reason: row["reason"]) else {
            throw StoreRefusal.inconsistent("A mobile authentication transaction has an unknown status.")
        }
        return MobileAuthTransaction(
            state: state,
            expiresAt: row["expires_at"],
            method: MobileAuthMethod(rawValue: row["method"]) ?? .confirmation,
            expectedNumber: row["number"],
            signsTransactions: row["signing_data_hash"] as Data? != nil,
            hasCallback: row["callback_uri"] as String? != nil
        )
    }

    /// The transaction `id` and its machine; nil when there is no such transaction.
    func transaction(_ id: String, _ db: any SQLSession) throws -> MobileAuthTransaction? {
        try SQLRow.fetchOne(
            db,
            sql: "SELECT \(Self.transactionColumns) FROM mobile_transactions WHERE id = ?",
            arguments: [id]
        )
        .map { try transaction($0) }
    }

    /// The signature an answer carried, kept when the machine says so.
    struct AnswerSignature: Sendable {
        var signature: Data
        var publicKey: String
    }

    /// What carrying out the machine's actions leaves the caller to do.
    enum TransactionCarried: Sendable, Equatable {
        /// Nothing more: applied, or ended by another change first with nothing to answer.
        case done
        /// Tell the device this status.
        case reply(MobileAuthTransactionStatus)
        /// Start the transaction's flow.
        case startFlow
    }

    /// Carries out `actions` for transaction `id` in order, inside the caller's transaction.
    /// Throws the machine's refusal; an ending over a row another change ended first stops here
    /// (its ``MobileAuthTransaction/Ending/ifTaken`` thrown, if any).
    @discardableResult
    func carryOut(
        _ actions: [MobileAuthTransaction.Action],
        transaction id: String,
        signature: AnswerSignature? = nil,
        _ db: any SQLSession
    ) throws -> TransactionCarried {
        var carried = TransactionCarried.done
        var endedAt: Double?
        for action in actions {
            switch action {
            case .refuse(let refusal):
                throw Self.storeRefusal(refusal)
            case .spendNonce(let device):
                try db.execute(
                    sql: "UPDATE mobile_deliveries SET nonce_hash = ? WHERE transaction_id = ? AND profile_id = ?",
                    arguments: [Data(), id, device]
                )
            case .keepSignature(let verified):
                guard let signature else { throw StoreRefusal.inconsistent("The answer's signature was not kept.") }
                try db.execute(
                    sql: """
                        UPDATE mobile_transactions SET signature = ?, user_public_key = ?, signature_verified = ?
                        WHERE id = ?
                        """,
                    arguments: [signature.signature, signature.publicKey, verified, id]
                )
            case .recordEnding(let ending):
                // The guard against races: only a row still pending is ended, once.
                try db.execute(
                    sql: """
                        UPDATE mobile_transactions SET status = ?, reason = ?, answered_at = ?, answered_by = ?,
                            callback_state = 'none', callback_next_at = ?
                        WHERE id = ? AND status = 'pending'
                        """,
                    arguments: [
                        ending.state.status.rawValue, ending.state.reason, ending.at, ending.answeredBy, ending.at, id,
                    ]
                )
                guard db.changesCount == 1 else {
                    if let refusal = ending.ifTaken { throw Self.storeRefusal(refusal) }
                    return .done
                }
                endedAt = ending.at
            case .queueCallback:
                guard let endedAt else { throw StoreRefusal.inconsistent("A callback queued before the ending.") }
                try db.execute(
                    sql: "UPDATE mobile_transactions SET callback_state = 'due', callback_next_at = ? WHERE id = ?",
                    arguments: [endedAt, id]
                )
            case .discardPayloads:
                try db.execute(
                    sql: "UPDATE mobile_deliveries SET sealed = ? WHERE transaction_id = ?",
                    arguments: [Data(), id]
                )
            case .recordMethod(let method):
                try db.execute(
                    sql: "UPDATE mobile_transactions SET authentication_method = ? WHERE id = ?",
                    arguments: [method, id]
                )
            case .startFlow:
                carried = .startFlow
            case .reply(let status):
                carried = .reply(status)
            }
        }
        return carried
    }

    static func storeRefusal(_ refusal: MobileAuthTransaction.Refusal) -> StoreRefusal {
        switch refusal {
        case .expired: .notFound(MobileAuthRequestError(.notFound, message: "The request expired."))
        case .alreadyHandled: .conflict(MobileAuthRequestError(.alreadyHandled))
        case .unsignedAnswer: .request("This type signs transactions: sign with the profile's key.")
        }
    }
}
