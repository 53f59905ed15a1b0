public import Logging

extension Logger {
    /// A logger for programs whose output a person reads (the demo, the examples): to standard
    /// error, nothing below `level` whatever level it is set to later — the token server keeps
    /// its audit trail at `notice` or below otherwise.
    public static func story(label: String, level: Logger.Level) -> Logger {
        var logger = Logger(label: label) { label in
            FloorLogHandler(floor: level, inner: StreamLogHandler.standardError(label: label))
        }
        logger.logLevel = level
        return logger
    }
}

/// Drops everything below `floor`, whatever level a logger is set to.
private struct FloorLogHandler: LogHandler {
    var floor: Logger.Level
    var inner: StreamLogHandler
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }
    var logLevel: Logger.Level {
        get { max(inner.logLevel, floor) }
        set { inner.logLevel = newValue }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }
    func log(event: LogEvent) {
        guard event.level >= floor else { return }
        inner.log(event: event)
    }
}
