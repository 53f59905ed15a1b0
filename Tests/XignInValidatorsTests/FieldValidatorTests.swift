import GatehouseKernel
import GatehouseTesting
import Testing
import XignInValidators

@Suite("XignIn PIN validator")
struct PinValidatorTests {
    let validator = PinValidator(minLength: 5, maxLength: 8)

    @Test(
        "gives each result code",
        arguments: [
            ("", PinValidator.ResultCode.empty),
            ("12a45", .onlyNumbers),
            ("12 345", .onlyNumbers),
            ("١٢٣٤٥", .onlyNumbers),  // Arabic-Indic digits are not 0–9
            ("1234", .tooShort),
            ("123456789", .tooLong),
            ("12345", .valid),
            ("12345678", .valid),
        ]
    )
    func resultCodes(input: String, expected: PinValidator.ResultCode) {
        #expect(validator.resultCode(for: input) == expected)
        #expect(validator.validate(input).code.rawValue == expected.rawValue)
    }

    @Test("messages use the specification's limits")
    func messages() {
        #expect(validator.message(for: .tooShort) == "The PIN must be at least 5 digits long.")
        #expect(validator.message(for: .tooLong) == "The PIN can't be longer than 8 digits.")
        #expect(validator.validate("1").violations.first?.message == "The PIN must be at least 5 digits long.")
    }

    @Test("a PIN specification keeps a valid PIN and forgets it when a later one is refused")
    func specification() {
        var specification = PinSpecification(minLength: 5, maxLength: 8)
        #expect(specification.minLength == 5)
        #expect(specification.maxLength == 8)
        #expect(specification.pin == nil)
        #expect(specification.setPin("24680") == .valid)
        #expect(specification.pin?.constantTimeEquals(PIN("24680")) == true)
        #expect(specification.setPin("2468") == .tooShort)
        #expect(specification.pin == nil)
    }
}

@Suite("XignIn e-mail validator")
struct EmailValidatorTests {
    let validator = EmailValidator()

    @Test(
        "accepts addresses a mail server delivers to",
        arguments: [
            "jane@example.com", "jane.doe+news@mail.example.co.uk", "o'brien@example.ie", "x@a-b.de",
            "user_1@sub.domain.example", "jürgen@münchen.de", "用户@例子.中国", "a!#$%&*+/=?^`{|}~-@example.org",
        ]
    )
    func valid(address: String) {
        #expect(validator.resultCode(for: address) == .valid)
        #expect(validator.validate(address).isValid)
    }

    @Test(
        "refuses what is not an address",
        arguments: [
            "jane", "jane@", "@example.com", "jane@example", "jane@@example.com", "jane@exa mple.com",
            " jane@example.com",
            "jane@example.com ", "jane..doe@example.com", ".jane@example.com", "jane.@example.com", "jane@-example.com",
            "jane@example-.com", "jane@example..com", "jane@example.com.", "jane@example.123", "jane@[192.0.2.1]",
            "\"jane doe\"@example.com", "jane@exa_mple.com", "jane\u{0}@example.com", "ja(ne)@example.com",
            "jane@" + String(repeating: "a", count: 64) + ".com", String(repeating: "j", count: 65) + "@example.com",
        ]
    )
    func invalid(address: String) {
        #expect(validator.resultCode(for: address) == .invalid)
        #expect(validator.validate(address).code == "invalid")
    }

    @Test("empty and white space only are empty, not invalid")
    func empty() {
        #expect(validator.resultCode(for: "") == .empty)
        #expect(validator.resultCode(for: "   ") == .empty)
        #expect(validator.message(for: .empty) == "The e-mail address must not be empty.")
    }

    @Test("refuses an address longer than its limit")
    func maxLength() {
        let address = String(repeating: "a", count: 60) + "@" + String(repeating: "b", count: 50) + ".example.com"
        #expect(EmailValidator(maxLength: 254).resultCode(for: address) == .valid)
        #expect(EmailValidator(maxLength: 100).resultCode(for: address) == .invalid)
    }
}

@Suite("XignIn alias validator")
struct AliasValidatorTests {
    let validator = AliasValidator(minLength: 3, maxLength: 10)

    @Test(
        "gives each result code; too short is below the minimum, too long above the maximum",
        arguments: [
            ("", AliasValidator.ResultCode.empty),
            ("   ", .empty),
            ("ab", .tooShort),
            ("  ab  ", .tooShort),
            ("abc", .valid),
            ("My phone", .valid),
            ("abcdefghij", .valid),
            ("abcdefghijk", .tooLong),
        ]
    )
    func resultCodes(input: String, expected: AliasValidator.ResultCode) {
        #expect(validator.resultCode(for: input) == expected)
    }

    @Test("counts characters as people see them")
    func graphemes() {
        #expect(validator.resultCode(for: "👩‍👩‍👧‍👦👍🏽é") == .valid)  // 3 characters, 18 scalars
        #expect(AliasValidator(minLength: 1, maxLength: 2).resultCode(for: "🇳🇱🇩🇪") == .valid)
        #expect(AliasValidator(minLength: 1, maxLength: 2).resultCode(for: "e\u{301}e\u{301}e\u{301}") == .tooLong)
    }

    @Test("messages say what the limits are, the right way round")
    func messages() {
        #expect(validator.message(for: .tooShort) == "The alias must be at least 3 characters long.")
        #expect(validator.message(for: .tooLong) == "The alias cannot be longer than 10 characters.")
        #expect(validator.message(for: .empty) == "The alias must not be empty.")
    }
}

@Suite("Registration information")
struct RegistrationInformationTests {
    @Test("keeps an accepted value and resets the value when one is refused")
    func setValue() {
        var email = RegistrationInformation(validator: EmailValidator(), isRequired: true)
        #expect(email.isRequired)
        #expect(email.value == nil)
        #expect(email.setValue(value: "jane@example.com") == .valid)
        #expect(email.value == "jane@example.com")
        #expect(email.setValue(value: "jane") == .invalid)
        #expect(email.value == nil)
        #expect(email.setValue(value: "") == .empty)
        #expect(email.value == nil)
    }

    @Test("a new accepted value clears the manager's verdict on the old one")
    func clearsServerError() {
        var email = RegistrationInformation(
            validator: EmailValidator(),
            isRequired: true,
            value: "taken@example.com",
            error: .notAvailable
        )
        #expect(email.error == .notAvailable)
        #expect(email.setValue(value: "bad") == .invalid)
        #expect(email.error == .notAvailable)
        #expect(email.setValue(value: "free@example.com") == .valid)
        #expect(email.error == RegistrationInformation<EmailValidator>.ErrorCode.none)
        #expect(
            RegistrationInformation<EmailValidator>.ErrorCode.allCases.map(\.rawValue) == [
                "none", "invalid", "notAvailable", "required",
            ]
        )
    }
}
