import Foundation
import GatehouseKernel
import GatehouseProtocol
import GatehouseTesting
import Testing

@testable import GatehouseServer

/// The push transaction's machine alone: every input, under a manual clock, no database.
@Suite("MobileAuthTransaction")
struct MobileAuthTransactionTests {
    typealias Machine = MobileAuthTransaction
    typealias Action = MobileAuthTransaction.Action

    let clock = ManualClock()
    var now: Double { clock.now.timeIntervalSince1970 }

    /// A pending transaction started now that lives a minute.
    func started(
        _ method: MobileAuthMethod = .confirmation,
        number: Int? = nil,
        signs: Bool = false,
        callback: Bool = false
    ) -> Machine {
        Machine(
            expiresAt: now + 60,
            method: method,
            expectedNumber: number,
            signsTransactions: signs,
            hasCallback: callback
        )
    }

    func approve(_ number: Int? = nil, signature: Machine.DeviceAnswer.Signature = .notChecked) -> Machine.DeviceAnswer
    {
        Machine.DeviceAnswer(device: "DEV001", decision: .approve(number: number), signature: signature)
    }

    func deny(_ reason: MobileAuthDenialReason? = nil) -> Machine.DeviceAnswer {
        Machine.DeviceAnswer(device: "DEV001", decision: .deny(reason))
    }

    /// The actions of an ending, as the store must carry them out.
    func ending(
        _ state: Machine.State,
        by device: String? = "DEV001",
        at time: Double,
        ifTaken: Machine.Refusal? = nil,
        callback: Bool = false
    ) -> [Action] {
        [.recordEnding(Machine.Ending(state: state, answeredBy: device, at: time, ifTaken: ifTaken))]
            + (callback ? [.queueCallback] : []) + [.discardPayloads]
    }

    // MARK: - The device's answer

    @Test("a confirmation approved: the nonce spent, the ending recorded (refused if taken), the method kept")
    func approveConfirmation() {
        var machine = started()
        clock.advance(by: 5)
        let actions = machine.answer(approve(), at: now)
        #expect(
            actions == [.spendNonce(device: "DEV001")]
                + ending(.approved, at: now, ifTaken: .alreadyHandled)
                + [.recordMethod("confirmation"), .reply(.approved)]
        )
        #expect(machine.state == .approved)
        #expect(machine.state.status == .approved && machine.state.reason == nil)
    }

    @Test("an ending with a callback queues it; one without does not")
    func callbackQueued() {
        var withCallback = started(callback: true)
        #expect(withCallback.answer(deny(), at: now).contains(.queueCallback))
        var without = started()
        #expect(!without.answer(deny(), at: now).contains(.queueCallback))
    }

    @Test(
        "a denial keeps the user's reason, not_accepted when none",
        arguments: [
            (MobileAuthDenialReason?.none, Machine.Denial.notAccepted),
            (.notAccepted, .notAccepted),
            (.notRecognised, .notRecognised),
        ]
    )
    func denyAnswer(reason: MobileAuthDenialReason?, expected: Machine.Denial) {
        var machine = started(.pin, number: 42, signs: true)
        // A denial needs no number, no signature and no flow, whatever the type.
        let actions = machine.answer(deny(reason), at: now)
        #expect(actions == [.spendNonce(device: "DEV001")] + ending(.denied(expected), at: now) + [.reply(.denied)])
        #expect(machine.state == .denied(expected))
        #expect(machine.state.reason == expected.rawValue)
    }

    @Test("number matching: the right number approves; a wrong or missing one denies at once (one try)")
    func numberMatching() {
        var right = started(number: 42)
        #expect(right.answer(approve(42), at: now).last == .reply(.approved))
        #expect(right.state == .approved)
        for typed in [41, nil] {
            var wrong = started(.pin, number: 42)
            let actions = wrong.answer(approve(typed), at: now)
            #expect(
                actions == [.spendNonce(device: "DEV001")] + ending(.denied(.invalidAnswer), at: now)
                    + [.reply(.denied)]
            )
            #expect(wrong.state == .denied(.invalidAnswer))
        }
    }

    @Test("transaction signing: verified is kept and approves; failed is kept and denies; none is refused")
    func signing() {
        var verified = started(signs: true)
        let kept = verified.answer(approve(signature: .verified), at: now)
        #expect(Array(kept.prefix(2)) == [.spendNonce(device: "DEV001"), .keepSignature(verified: true)])
        #expect(verified.state == .approved)

        var failed = started(signs: true, callback: true)
        #expect(
            failed.answer(approve(signature: .failed), at: now)
                == [.spendNonce(device: "DEV001"), .keepSignature(verified: false)]
                + ending(.denied(.invalidSignature), at: now, callback: true) + [.reply(.denied)]
        )
        #expect(failed.state == .denied(.invalidSignature))

        for signature in [Machine.DeviceAnswer.Signature.unusable, .notChecked] {
            var unsigned = started(signs: true)
            #expect(unsigned.answer(approve(signature: signature), at: now) == [.refuse(.unsignedAnswer)])
            #expect(unsigned.state == .pending)
        }
    }

    @Test("the number is checked before the signature: a wrong number denies even unsigned")
    func numberBeforeSignature() {
        var machine = started(number: 42, signs: true)
        #expect(machine.answer(approve(7, signature: .unusable), at: now).last == .reply(.denied))
        #expect(machine.state == .denied(.invalidAnswer))
    }

    @Test("a method with an authenticator starts its flow and stays pending; with signing, the signature first")
    func flowStart() {
        var pin = started(.pin)
        #expect(pin.answer(approve(), at: now) == [.spendNonce(device: "DEV001"), .startFlow])
        #expect(pin.state == .pending)

        var signedPin = started(.pin, number: 42, signs: true)
        #expect(
            signedPin.answer(approve(42, signature: .verified), at: now)
                == [.spendNonce(device: "DEV001"), .keepSignature(verified: true), .startFlow]
        )
        #expect(signedPin.state == .pending)
        // The same device again, its nonce spent by the flow's start: already handled.
        var again = approve(42, signature: .verified)
        again.alreadyAnswered = true
        #expect(signedPin.answer(again, at: now) == [.refuse(.alreadyHandled)])
    }

    @Test("an answer at or after the expiry is refused as expired and changes nothing")
    func answerAfterExpiry() {
        var machine = started()
        clock.advance(by: 59.9)
        #expect(machine.refusalToDevice(at: now) == nil)
        clock.advance(by: 0.1)
        #expect(machine.answer(approve(), at: now) == [.refuse(.expired)])
        #expect(machine.answer(deny(), at: now) == [.refuse(.expired)])
        #expect(machine.state == .pending)
        #expect(machine.reported(at: now) == .expired)
    }

    @Test("a second answer to an ended transaction is refused as already handled", arguments: [true, false])
    func doubleAnswer(approvedFirst: Bool) {
        var machine = started()
        _ = machine.answer(approvedFirst ? approve() : deny(), at: now)
        let ended = machine.state
        #expect(machine.answer(approve(), at: now) == [.refuse(.alreadyHandled)])
        #expect(machine.answer(deny(), at: now) == [.refuse(.alreadyHandled)])
        // Even after its expiry: it ended otherwise, and the device is told so.
        clock.advance(by: 3600)
        #expect(machine.answer(approve(), at: now) == [.refuse(.alreadyHandled)])
        #expect(machine.state == ended)
    }

    @Test("a transaction the sweep expired answers expired, even to a device whose clock is behind")
    func answerToExpired() {
        var machine = Machine(state: .expired, expiresAt: now + 60, method: .confirmation)
        #expect(machine.answer(approve(), at: now) == [.refuse(.expired)])
        #expect(machine.refusalToDevice(at: now) == .expired)
    }

    // MARK: - The linked flow

    @Test("the flow's success approves with its method; refused once ended or lapsed")
    func flowApproved() {
        var machine = started(.biometric, callback: true)
        _ = machine.answer(approve(), at: now)
        clock.advance(by: 10)
        #expect(
            machine.flowApproved(method: "pin", by: "DEV001", at: now)
                == ending(.approved, at: now, ifTaken: .alreadyHandled, callback: true) + [.recordMethod("pin")]
        )
        #expect(machine.state == .approved)
        #expect(machine.flowApproved(method: "pin", by: "DEV001", at: now) == [.refuse(.alreadyHandled)])

        var lapsed = started(.pin)
        clock.advance(by: 60)
        #expect(lapsed.flowApproved(method: "pin", by: "DEV001", at: now) == [.refuse(.alreadyHandled)])
        #expect(lapsed.state == .pending)
    }

    @Test("the flow ending unapproved denies: invalid_answer when refused, not_accepted when cancelled")
    func flowEndedUnapproved() {
        for (refused, denial) in [(true, Machine.Denial.invalidAnswer), (false, .notAccepted)] {
            var machine = started(.pin)
            #expect(
                machine.flowEndedUnapproved(refused: refused, by: "DEV001", at: now)
                    == ending(.denied(denial), at: now)
            )
            #expect(machine.state == .denied(denial))
            // Ended already: nothing more.
            #expect(machine.flowEndedUnapproved(refused: !refused, by: "DEV001", at: now).isEmpty)
            #expect(machine.state == .denied(denial))
        }
        var approved = started(.pin)
        _ = approved.flowApproved(method: "pin", by: "DEV001", at: now)
        #expect(approved.flowEndedUnapproved(refused: true, by: "DEV001", at: now).isEmpty)
        #expect(approved.state == .approved)
    }

    // MARK: - The server's own endings

    @Test("a newer request supersedes a pending one; an ended one stays as it is")
    func superseded() {
        var machine = started(callback: true)
        #expect(machine.superseded(at: now) == ending(.denied(.superseded), by: nil, at: now, callback: true))
        #expect(machine.state.reason == "superseded")
        var approved = started()
        _ = approved.answer(approve(), at: now)
        #expect(approved.superseded(at: now).isEmpty)
        #expect(approved.state == .approved)
    }

    @Test("the devices gone deny: device_disenrolled or user_deregistered; an ended one stays")
    func devicesGone() {
        var disenrolled = started()
        #expect(disenrolled.devicesGone(.disenrolled, at: now) == ending(.denied(.deviceDisenrolled), by: nil, at: now))
        #expect(disenrolled.state.reason == "device_disenrolled")
        var deregistered = started()
        _ = deregistered.devicesGone(.deregistered, at: now)
        #expect(deregistered.state.reason == "user_deregistered")
        #expect(deregistered.devicesGone(.disenrolled, at: now).isEmpty)
        #expect(deregistered.state == .denied(.userDeregistered))
    }

    @Test("the sweep expires a pending transaction at its expiry, not before, and never an ended one")
    func expiry() {
        var machine = started(callback: true)
        clock.advance(by: 59)
        #expect(machine.expire(at: now).isEmpty)
        #expect(machine.state == .pending)
        clock.advance(by: 1)
        #expect(machine.expire(at: now) == ending(.expired, by: nil, at: now, callback: true))
        #expect(machine.state == .expired)
        #expect(machine.state.status == .expired && machine.state.reason == "expired")
        #expect(machine.expire(at: now + 1).isEmpty)
        #expect(machine.answer(approve(), at: now) == [.refuse(.expired)])

        var denied = started()
        _ = denied.answer(deny(), at: now)
        clock.advance(by: 120)
        #expect(denied.expire(at: now).isEmpty)
        #expect(denied.reported(at: now) == .denied(.notAccepted))
    }

    // MARK: - What is stored

    @Test("the stored status and reason: the strings written before the machine, read back to the same state")
    func storedStrings() {
        let written: [(Machine.State, String, String?)] = [
            (.pending, "pending", nil), (.approved, "approved", nil), (.expired, "expired", "expired"),
            (.denied(.notAccepted), "denied", "not_accepted"), (.denied(.notRecognised), "denied", "not_recognised"),
            (.denied(.invalidAnswer), "denied", "invalid_answer"),
            (.denied(.invalidSignature), "denied", "invalid_signature"),
            (.denied(.superseded), "denied", "superseded"),
            (.denied(.deviceDisenrolled), "denied", "device_disenrolled"),
            (.denied(.userDeregistered), "denied", "user_deregistered"),
        ]
        #expect(written.count == Machine.Denial.allCases.count + 3)
        for (state, status, reason) in written {
            #expect(state.status.rawValue == status && state.reason == reason, "\(state)")
            #expect(Machine.State(status: status, reason: reason) == state)
        }
        #expect(Machine.State(status: "denied", reason: "whatever") == nil)
        #expect(Machine.State(status: "cancelled", reason: nil) == nil)
        // Every reason a device may give is a denial the machine stores as it came.
        for reason in MobileAuthDenialReason.allCases {
            var machine = started()
            _ = machine.answer(deny(reason), at: now)
            #expect(machine.state.reason == reason.rawValue)
        }
    }
}
