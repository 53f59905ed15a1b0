extension QRCode {
    /// The symbol as an SVG image to put inline in an HTML page (it has no XML declaration):
    /// an `<svg>` element with a white background and one `<path>` that draws every dark module,
    /// each horizontal run of dark modules as one rectangle, with `shape-rendering="crispEdges"`.
    ///
    /// The `viewBox` counts modules, quiet zone included; `width` and `height` are that many
    /// modules times `moduleSize` pixels, so CSS may scale the image freely.
    ///
    /// - Parameters:
    ///   - moduleSize: Pixels per module in `width` and `height`, clamped to 1...64.
    ///   - quietZone: Light modules around the symbol, clamped to 0...16. The standard asks for 4;
    ///     less may do where the page around the image is light.
    ///   - title: The accessible name, written as the first child `<title>` (escaped for XML,
    ///     control characters other than tab and line breaks dropped); `nil` writes none.
    public func svg(moduleSize: Int = 4, quietZone: Int = 4, title: String? = nil) -> String {
        let moduleSize = min(max(moduleSize, 1), 64)
        let quietZone = min(max(quietZone, 0), 16)
        let extent = size + 2 * quietZone
        let pixels = extent * moduleSize
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(extent) \(extent)\""
        svg += " width=\"\(pixels)\" height=\"\(pixels)\" role=\"img\" shape-rendering=\"crispEdges\">"
        if let title { svg += "<title>\(Self.escapedForXML(title))</title>" }
        svg += "<rect width=\"\(extent)\" height=\"\(extent)\" fill=\"#fff\"/><path fill=\"#000\" d=\""
        svg.reserveCapacity(svg.utf8.count + size * size + 64)
        for row in 0..<size {
            var column = 0
            while column < size {
                guard isDark(row: row, column: column) else {
                    column += 1
                    continue
                }
                let start = column
                while column < size && isDark(row: row, column: column) { column += 1 }
                let length = column - start
                svg += "M\(start + quietZone) \(row + quietZone)h\(length)v1h-\(length)z"
            }
        }
        svg += "\"/></svg>"
        return svg
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` as character references and without the control
    /// characters XML does not allow, fit for XML character data and attribute values.
    private static func escapedForXML(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\t", "\n", "\r": escaped.unicodeScalars.append(character)
            case "\u{0}"..."\u{1F}", "\u{FFFE}", "\u{FFFF}": continue  // not allowed in XML
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }
}
