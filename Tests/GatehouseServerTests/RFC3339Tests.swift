import Foundation
import Testing

@testable import GatehouseServer

@Suite("RFC 3339 times of the admin API's since and until")
struct RFC3339Tests {
    @Test(
        "every date-time JSON Schema takes is read, to the second and fraction, whatever its offset",
        arguments: [
            ("2026-11-25T12:00:00Z", 1_795_608_000.0),
            ("2026-11-25t12:00:00z", 1_795_608_000.0),
            ("2026-11-25T13:00:00+01:00", 1_795_608_000.0),
            ("2026-11-25T12:00:00.25Z", 1_795_608_000.25),
            ("1970-01-01T00:00:00Z", 0),
            ("1970-01-01T00:00:00+23:59", -86_340),
            ("1969-12-31T23:59:59-00:00", -1),
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("0001-01-01T00:00:00Z", -62_135_596_800),
            ("9999-12-31T23:59:59-23:59", 253_402_387_139),
        ]
    )
    func reads(_ text: String, _ seconds: Double) throws {
        let date = try #require(RFC3339.date(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_1)
    }

    @Test(
        "what is not an RFC 3339 date-time is refused",
        arguments: [
            "", "yesterday", "2026-11-25", "2026-11-25T12:00:00", "2026-11-25 12:00:00Z", "0000-01-01T00:00:00Z",
            "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-11-25T24:00:00Z",
            "2026-11-25T12:60:00Z", "2026-11-25T12:00:60Z", "2026-11-25T12:00:00.Z", "2026-11-25T12:00:00+24:00",
            "2026-11-25T12:00:00+01", "2026-11-25T12:00:00Z ", "+2026-11-25T12:00:00Z", "２026-11-25T12:00:00Z",
        ]
    )
    func refuses(_ text: String) {
        #expect(RFC3339.date(text) == nil)
    }
}
