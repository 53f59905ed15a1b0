import Foundation
import GatehouseKernel
import Testing
import XignInValidators

private let today = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15

@Suite("XignIn attribute validators")
struct AttributeValidatorTests {
    @Test(
        "phone numbers",
        arguments: [
            ("", PhoneValidator.ResultCode.empty), ("  ", .empty), ("+31 6 1234 5678", .valid),
            ("(030) 123-4567", .valid),
            ("12345", .invalid), ("+1234567890123456", .invalid), ("06-1234x678", .invalid), ("31+612345678", .invalid),
        ]
    )
    func phone(input: String, expected: PhoneValidator.ResultCode) {
        #expect(PhoneValidator().resultCode(for: input) == expected)
    }

    @Test(
        "names and places",
        arguments: [
            ("", NameValidator.ResultCode.empty), ("Zoë", .valid), ("Jean-Luc O'Neill", .valid), ("a\u{7}b", .invalid),
            (String(repeating: "n", count: 101), .tooLong),
        ]
    )
    func name(input: String, expected: NameValidator.ResultCode) {
        #expect(NameValidator().resultCode(for: input) == expected)
    }

    @Test(
        "dates of birth: real, past, YYYY-MM-DD",
        arguments: [
            ("", BirthdateValidator.ResultCode.empty), ("1990-02-28", .valid), ("2000-02-29", .valid),
            ("1990-02-29", .invalid),
            ("1990-2-28", .invalid), ("28-02-1990", .invalid), ("2030-01-01", .invalid), ("1899-12-31", .invalid),
            ("1990-13-01", .invalid),
        ]
    )
    func birthdate(input: String, expected: BirthdateValidator.ResultCode) {
        #expect(BirthdateValidator(today: today).resultCode(for: input) == expected)
    }
}

@Suite("XignIn registration parameters")
struct RegistrationParametersTests {
    private func parameters() -> RegistrationParameters {
        RegistrationParameters(
            managerURL: URL(fileURLWithPath: "/"),
            serviceMappingID: nil,
            pinSpec: PinSpecification(minLength: 5, maxLength: 8),
            validatorAlias: AliasValidator(minLength: 2, maxLength: 20),
            categories: [
                IdentificationCategory(
                    id: "email",
                    types: [.email],
                    identificationAttributes: [.email],
                    info: RegistrationPersonalInformation(required: [.email], today: today)
                ),
                IdentificationCategory(
                    id: "idCard",
                    types: [.idCard],
                    identificationAttributes: [.firstName, .lastName, .birthdate, .placeOfBirth],
                    info: RegistrationPersonalInformation(
                        required: [.firstName, .lastName, .birthdate, .placeOfBirth],
                        today: today
                    )
                ),
            ]
        )
    }

    @Test("a category is selected and filled in through the selection, as in the seed")
    func selection() throws {
        var parameters = parameters()
        #expect(parameters.selection == nil)
        let other = IdentificationCategory(
            id: "none",
            types: [.anonymous],
            identificationAttributes: [],
            info: .init(required: [])
        )
        let unknown = parameters.setSelection(other)
        #expect(!unknown)
        let known = parameters.setSelection(parameters.categories[0])
        #expect(known)
        #expect(parameters.selection?.info.email.isRequired == true)
        #expect(parameters.selection?.info.phone.isRequired == false)
        let refused = parameters.selection?.info.email.setValue(value: "jane@")
        #expect(refused == .invalid)
        #expect(parameters.selection?.info.email.value == nil)
        let accepted = parameters.selection?.info.email.setValue(value: "jane@example.com")
        #expect(accepted == .valid)
        #expect(parameters.categories[0].info.email.value == "jane@example.com")
        #expect(parameters.selection?.info.values == [.email: "jane@example.com"])
    }

    @Test("alias and arbitrary attributes")
    func optionalData() {
        var parameters = parameters()
        let short = parameters.setAlias("J")
        #expect(short == .tooShort)
        #expect(parameters.alias == nil)
        let good = parameters.setAlias("Jane's phone")
        #expect(good == .valid)
        #expect(parameters.alias == "Jane's phone")
        #expect(parameters.setAlias("Hi\r\nBcc: x@evil.io") == .invalid)
        #expect(parameters.setAlias("Tab\there") == .invalid)
        #expect(parameters.setAlias("Line\u{2028}break") == .invalid)
        // A refused alias clears the one set before, as a too-short one does.
        #expect(parameters.alias == nil)
        let empty = parameters.setAlias("")
        #expect(empty == .empty)
        #expect(parameters.alias == nil)
        #expect(parameters.validatorAlias.maxLength == 20)
        parameters.setArbitraryUserAttributes(["team": "blue"])
        #expect(parameters.arbitraryUserAttributes == ["team": "blue"])
    }

    @Test("the manager's own check: required attributes missing, invalid values")
    func managerCheck() {
        let idCard = RegistrationPersonalInformation(
            required: [.firstName, .lastName, .birthdate, .placeOfBirth],
            today: today
        )
        #expect(
            idCard.check([.firstName: "Jane", .birthdate: "1990-02-30", .email: "nope", .lastName: "  "])
                == [.lastName: .required, .birthdate: .invalid, .placeOfBirth: .required, .email: .invalid]
        )
        #expect(
            idCard.check([.firstName: "Jane", .lastName: "Doe", .birthdate: "1990-02-28", .placeOfBirth: "Utrecht"])
                .isEmpty
        )
    }

    @Test("verdicts are set per attribute and cleared by a new accepted value")
    func verdicts() {
        var info = RegistrationPersonalInformation(required: [.email])
        info.setErrors([.email: .notAvailable, .phone: .invalid])
        #expect(info.error(of: .email) == .notAvailable)
        #expect(info.error(of: .phone) == .invalid)
        #expect(info.error(of: .firstName) == AttributeError.none)
        info.email.setValue(value: "other@example.com")
        #expect(info.error(of: .email) == AttributeError.none)
        info.setErrors([:])
        #expect(info.error(of: .phone) == AttributeError.none)
    }
}
