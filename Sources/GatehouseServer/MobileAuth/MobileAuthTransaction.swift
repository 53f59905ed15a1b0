import GatehouseKernel
import GatehouseProtocol

/// The rules of one push transaction — who may end it, how, and what answering an ended one
/// gets — as a pure, synchronous state machine: an input in, the new state and the actions out.
/// The store loads the row, asks the machine, and carries the actions out in the same database
/// transaction (MobileAuthStore+Actions.swift); time comes in as an input, as does every fact
/// only the store can establish (the device's nonce spent, the signature's verdict).
///
/// A transaction is `pending` until exactly one of: approved (a confirmation, or the flow of a
/// method with an authenticator), denied for a ``Denial``, or expired. An ended transaction
/// never changes again: an answer to it is refused, any other input does nothing. The store's
/// conditional write (`… WHERE status = 'pending'`) settles races between instances: when
/// another change ended the row first, ``Ending/ifTaken`` says what the loser answers.
struct MobileAuthTransaction: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case pending
        case approved
        case denied(Denial)
        case expired

        /// The status the store writes and the portal reads.
        var status: MobileAuthTransactionStatus {
            switch self {
            case .pending: .pending
            case .approved: .approved
            case .denied: .denied
            case .expired: .expired
            }
        }

        /// The reason the store writes and the portal reads (`nil` while pending and when approved).
        var reason: String? {
            switch self {
            case .pending, .approved: nil
            case .denied(let denial): denial.rawValue
            case .expired: "expired"
            }
        }

        /// The state a stored status and reason stand for; nil for a combination no version wrote.
        init?(status: String, reason: String?) {
            switch MobileAuthTransactionStatus(rawValue: status) {
            case .pending: self = .pending
            case .approved: self = .approved
            case .expired: self = .expired
            case .denied:
                guard let denial = reason.flatMap(Denial.init(rawValue:)) else { return nil }
                self = .denied(denial)
            case nil: return nil
            }
        }
    }

    /// Why a transaction was denied, as stored and as the portal reads it.
    enum Denial: String, Sendable, CaseIterable {
        /// The user said no (also: the user cancelled the flow of an authenticator).
        case notAccepted = "not_accepted"
        /// The user does not recognise the request.
        case notRecognised = "not_recognised"
        /// A wrong number typed (one try), or the flow of an authenticator refused the answer.
        case invalidAnswer = "invalid_answer"
        /// The device's transaction signature does not verify.
        case invalidSignature = "invalid_signature"
        /// A newer request of the same API client, user and type.
        case superseded
        /// The only devices asked were disenrolled by an `override` enrolment.
        case deviceDisenrolled = "device_disenrolled"
        /// The only devices asked were deregistered (their profiles removed).
        case userDeregistered = "user_deregistered"
    }

    /// Why the devices that could answer are gone.
    enum DeviceLoss: Sendable, Equatable {
        case disenrolled, deregistered
    }

    /// What the device's answer says, with what the store established about it.
    struct DeviceAnswer: Sendable, Equatable {
        enum Decision: Sendable, Equatable {
            /// Accept, with the number the user typed (number matching).
            case approve(number: Int?)
            /// Deny, with the user's reason (`not_accepted` when none).
            case deny(MobileAuthDenialReason?)
        }

        /// The verdict on the transaction signature, when the transaction signs.
        enum Signature: Sendable, Equatable {
            /// Not checked: the transaction does not sign, or the answer is a denial.
            case notChecked
            /// Missing, or not made with the profile's key: the answer cannot be taken.
            case unusable
            case verified
            case failed
        }

        /// The profile that answered.
        var device: String
        var decision: Decision
        /// The device's single-use nonce was spent by an earlier answer of its own.
        var alreadyAnswered = false
        var signature = Signature.notChecked
    }

    /// Why an input is refused; nothing changes.
    enum Refusal: Error, Sendable, Equatable {
        /// Expired, swept or not: the device is told it is not there any more.
        case expired
        /// Ended otherwise (answered, superseded, its device gone), or this device answered already.
        case alreadyHandled
        /// The transaction signs, and the answer carries no usable signature.
        case unsignedAnswer
    }

    /// How a transaction ends.
    struct Ending: Sendable, Equatable {
        var state: State
        /// The profile whose answer (or flow) ended it; nil for the server's own endings.
        var answeredBy: String?
        var at: Double
        /// What to answer when another change ended the row first; nil: nothing, it is ended anyway.
        var ifTaken: Refusal?
    }

    enum Action: Sendable, Equatable {
        /// Spend the device's single-use nonce: it cannot answer again.
        case spendNonce(device: String)
        /// Keep the device's transaction signature with the server's verdict, for the portal.
        case keepSignature(verified: Bool)
        /// Write the ending, only over a row still pending.
        case recordEnding(Ending)
        /// Put the portal's callback in the outbox, due now.
        case queueCallback
        /// Forget the sealed payloads: nobody may read them any more, and a key that leaks later opens nothing.
        case discardPayloads
        /// Record the authentication method that approved it (`pin` after a fallback, say).
        case recordMethod(String?)
        /// The method needs an authenticator: start the flow that approves the transaction when it succeeds.
        case startFlow
        /// Tell the device where the transaction now stands.
        case reply(MobileAuthTransactionStatus)
        /// Refuse the input; nothing else is applied.
        case refuse(Refusal)
    }

    private(set) var state: State
    let expiresAt: Double
    let method: MobileAuthMethod
    /// The number the portal shows, when number matching is on.
    let expectedNumber: Int?
    let signsTransactions: Bool
    let hasCallback: Bool

    init(
        state: State = .pending,
        expiresAt: Double,
        method: MobileAuthMethod,
        expectedNumber: Int? = nil,
        signsTransactions: Bool = false,
        hasCallback: Bool = false
    ) {
        self.state = state
        self.expiresAt = expiresAt
        self.method = method
        self.expectedNumber = expectedNumber
        self.signsTransactions = signsTransactions
        self.hasCallback = hasCallback
    }

    // MARK: - Reading

    /// Whether a device may still read or answer it at `now`: expired (swept or not) is
    /// `expired`, ended otherwise is `alreadyHandled`.
    func refusalToDevice(at now: Double) -> Refusal? {
        switch state {
        case .pending: now < expiresAt ? nil : .expired
        case .expired: .expired
        case .approved, .denied: .alreadyHandled
        }
    }

    /// Where it stands at `now` as the portal reads it: a lapsed transaction reads as expired
    /// before the sweep has written so.
    func reported(at now: Double) -> State {
        state == .pending && expiresAt <= now ? .expired : state
    }

    // MARK: - Inputs

    /// The device's answer at `now`.
    mutating func answer(_ answer: DeviceAnswer, at now: Double) -> [Action] {
        if let refusal = refusalToDevice(at: now) { return [.refuse(refusal)] }
        guard !answer.alreadyAnswered else { return [.refuse(.alreadyHandled)] }
        let spend = Action.spendNonce(device: answer.device)
        switch answer.decision {
        case .deny(let reason):
            let denial = Denial(rawValue: (reason ?? .notAccepted).rawValue) ?? .notAccepted
            return [spend] + end(.denied(denial), by: answer.device, at: now) + [.reply(.denied)]
        case .approve(let typed):
            if let expectedNumber {
                // One try: a wrong number ends the transaction, so it cannot be guessed.
                guard let typed, ConstantTime.equals(Array(String(typed).utf8), Array(String(expectedNumber).utf8))
                else {
                    return [spend] + end(.denied(.invalidAnswer), by: answer.device, at: now) + [.reply(.denied)]
                }
            }
            var actions = [spend]
            if signsTransactions {
                switch answer.signature {
                case .notChecked, .unusable: return [.refuse(.unsignedAnswer)]
                case .failed:
                    // Kept with its verdict for the portal; the transaction ends.
                    return actions + [.keepSignature(verified: false)]
                        + end(.denied(.invalidSignature), by: answer.device, at: now) + [.reply(.denied)]
                case .verified: actions.append(.keepSignature(verified: true))
                }
            }
            guard method == .confirmation else { return actions + [.startFlow] }
            return actions
                + end(.approved, by: answer.device, at: now, ifTaken: .alreadyHandled)
                + [.recordMethod(MobileAuthMethod.confirmation.rawValue), .reply(.approved)]
        }
    }

    /// The transaction's flow succeeded with `method` (its first stage's authenticator): approve,
    /// unless it ended or lapsed meanwhile (answered on another device, superseded, expired).
    mutating func flowApproved(method: String?, by device: String?, at now: Double) -> [Action] {
        guard state == .pending, now < expiresAt else { return [.refuse(.alreadyHandled)] }
        return end(.approved, by: device, at: now, ifTaken: .alreadyHandled) + [.recordMethod(method)]
    }

    /// The transaction's flow ended without approving it: `refused` (a wrong answer) or cancelled.
    mutating func flowEndedUnapproved(refused: Bool, by device: String?, at now: Double) -> [Action] {
        guard state == .pending else { return [] }
        return end(.denied(refused ? .invalidAnswer : .notAccepted), by: device, at: now)
    }

    /// A newer transaction of the same API client, user and type started.
    mutating func superseded(at now: Double) -> [Action] {
        guard state == .pending else { return [] }
        return end(.denied(.superseded), by: nil, at: now)
    }

    /// No device that was asked can answer any more.
    mutating func devicesGone(_ loss: DeviceLoss, at now: Double) -> [Action] {
        guard state == .pending else { return [] }
        let denial: Denial =
            switch loss {
            case .disenrolled: .deviceDisenrolled
            case .deregistered: .userDeregistered
            }
        return end(.denied(denial), by: nil, at: now)
    }

    /// The sweep at `now`: a pending transaction past its expiry expires.
    mutating func expire(at now: Double) -> [Action] {
        guard state == .pending, expiresAt <= now else { return [] }
        return end(.expired, by: nil, at: now)
    }

    private mutating func end(_ next: State, by device: String?, at now: Double, ifTaken: Refusal? = nil) -> [Action] {
        state = next
        return [.recordEnding(Ending(state: next, answeredBy: device, at: now, ifTaken: ifTaken))]
            + (hasCallback ? [.queueCallback] : []) + [.discardPayloads]
    }
}
