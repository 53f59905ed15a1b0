import Foundation
import GatehouseKernel
import Testing

@Suite("Values")
struct ValuesTests {
    @Test("a PIN never shows its digits")
    func pinIsRedacted() {
        let pin = PIN("482913")
        #expect("\(pin)" == "PIN(redacted)")
        #expect(String(reflecting: pin) == "PIN(redacted)")
        var dumped = ""
        dump(pin, to: &dumped)
        #expect(!dumped.contains("482913"))
        #expect(!dumped.contains("52"))  // the first byte, '4', in decimal
        #expect(pin.count == 6)
        #expect(pin.digits == [4, 8, 2, 9, 1, 3])
        #expect(PIN("48a913").digits == nil)
        #expect(PIN("").isEmpty)
    }

    @Test("PINs compare by content")
    func pinComparison() {
        #expect(PIN("123456").constantTimeEquals(PIN("123456")))
        #expect(!PIN("123456").constantTimeEquals(PIN("123457")))
        #expect(!PIN("12345").constantTimeEquals(PIN("123456")))
        #expect(PIN("123456").withUTF8 { Array($0) } == Array("123456".utf8))
    }

    @Test("failure counts say how many tries are left; zero maximum means unlimited")
    func failureCounts() {
        #expect(FailureCounts(maximum: 3, previous: 1).remaining == 2)
        #expect(FailureCounts(maximum: 3, previous: 5).remaining == 0)
        #expect(FailureCounts(maximum: 0, previous: 7).remaining == nil)
        let challenge = PinChallenge(
            profile: UserProfile(id: "abc123"),
            authenticator: AuthenticatorDescriptor(id: "pin", type: "pin", name: "PIN"),
            failureCounts: FailureCounts(maximum: 3, previous: 2)
        )
        #expect(challenge.maxFailureCount == 3)
        #expect(challenge.previousFailureCount == 2)
        #expect(challenge.remainingFailureCount == 1)
    }

    @Test("custom info status ranges")
    func customInfoRanges() {
        #expect(CustomInfo(status: 2000).isSuccess)
        #expect(CustomInfo(status: 4001).isRetryableFailure)
        #expect(CustomInfo(status: 5000, data: "cleanup").isFinalFailure)
        #expect(!CustomInfo(status: 3000).isSuccess)
    }

    @Test("validation reports list every code, most important first")
    func reports() {
        #expect(ValidationReport.valid.codes == [.valid])
        #expect(ValidationReport.valid.description == "valid")
        let report = ValidationReport(violations: [
            .init(code: "tooShort", message: "a"), .init(code: "blacklisted", message: "b"),
        ])
        #expect(report.code == "tooShort")
        #expect(report.description == "tooShort, blacklisted")
        #expect(!report.isValid)
    }
}
