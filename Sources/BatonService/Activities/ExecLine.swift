public enum ExecLine {
    /// Splits an Exec value into arguments per the Desktop Entry spec: double-quoted arguments with
    /// \" \` \$ \\ escapes; field codes (%f, %U, ...) removed and %% kept as %. Nil if malformed.
    public static func arguments(_ exec: String) -> [String]? {
        var arguments: [String] = []
        var current = ""
        var hasCurrent = false
        var inQuotes = false
        var iterator = Array(exec).makeIterator()
        while let character = iterator.next() {
            if inQuotes {
                switch character {
                case "\"": inQuotes = false
                case "\\":
                    guard let next = iterator.next() else { return nil }
                    current.append(next)
                default: current.append(character)
                }
                continue
            }
            switch character {
            case " ", "\t":
                if hasCurrent { arguments.append(current) }
                current = ""
                hasCurrent = false
            case "\"":
                inQuotes = true
                hasCurrent = true
            case "%":
                guard let code = iterator.next() else { return nil }
                if code == "%" {
                    current.append("%")
                    hasCurrent = true
                } else if !"fFuUdDnNickvm".contains(code) {
                    return nil
                }
            default:
                current.append(character)
                hasCurrent = true
            }
        }
        guard !inQuotes else { return nil }
        if hasCurrent { arguments.append(current) }
        return arguments.isEmpty ? nil : arguments
    }
}
