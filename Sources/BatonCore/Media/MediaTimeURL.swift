// SPDX-License-Identifier: LGPL-2.1-or-later
/// A web page's URL with a media start time, for the sites whose time parameter is documented
/// (docs/media.md, "Which sites open at the time"). Pure string work on a URL that another
/// machine sent: the URL must be a web address (`isWebAddress`) of at most `maximumURLLength`
/// bytes and the time a finite number of seconds in `PageMedia.positions`, else nothing is built.
public enum MediaTimeURL {
    /// The sites that take a start time, each in its own documented form.
    public enum Site: String, Equatable, Sendable, CaseIterable {
        /// youtube.com/watch?v=ID and youtu.be/ID: `t=SECONDS`.
        case youTube
        /// youtube.com/embed/ID and youtube-nocookie.com/embed/ID (the embedded player): `start=SECONDS`.
        case youTubeEmbed
        /// vimeo.com/…/ID and player.vimeo.com/video/ID: the fragment `#t=SECONDSs`.
        case vimeo
        /// player.twitch.tv/?video=ID (a past broadcast in Twitch's player): `time=XhYmZs`.
        case twitchPlayer
        /// geo.dailymotion.com/player[/PLAYER].html?video=ID (Dailymotion's player): `startTime=SECONDS`.
        case dailymotionPlayer
        /// Opencast's Paella player on any host, …/paella{,7,8}/ui/watch.html?id=ID: `time=SECONDSs`.
        case opencastPaella
        /// A bare media file (its path ends in a media extension): the W3C media fragment `#t=SECONDS`.
        case mediaFile
    }

    public static let maximumURLLength = 8192

    /// File name endings of media a browser plays by itself (its own media document).
    public static let mediaExtensions = [".mp4", ".m4v", ".m4a", ".webm", ".ogv", ".oga", ".ogg", ".opus", ".mp3", ".aac", ".flac", ".wav"]

    static let youTubeHosts: Set<String> = ["youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com"]
    static let youTubeEmbedHosts: Set<String> = ["youtube.com", "www.youtube.com", "youtube-nocookie.com", "www.youtube-nocookie.com"]
    static let paellaPages = ["/paella/ui/watch.html", "/paella7/ui/watch.html", "/paella8/ui/watch.html"]

    /// Which documented site `url` is a media page of; nil for every other page.
    public static func site(of url: String) -> Site? {
        guard url.utf8.count <= maximumURLLength, isWebAddress(url), let parts = Parts(url) else { return nil }
        return parts.site
    }

    /// `page` opened at `seconds` (whole seconds, rounded down) where its site takes a time, with
    /// any time it had replaced; nil when the site takes none (the page opens as it is, and the
    /// time is lost) or the input is not a web address or a sane time.
    public static func url(_ page: String, at seconds: Double) -> String? {
        guard seconds.isFinite, PageMedia.positions.contains(seconds), page.utf8.count <= maximumURLLength, isWebAddress(page),
              var parts = Parts(page), let site = parts.site else { return nil }
        let whole = Int(seconds.rounded(.down))
        switch site {
        case .youTube: parts.setQuery("t", "\(whole)")
        case .youTubeEmbed: parts.setQuery("start", "\(whole)")
        case .vimeo: parts.fragment = "t=\(whole)s"
        case .twitchPlayer: parts.setQuery("time", "\(whole / 3600)h\(whole % 3600 / 60)m\(whole % 60)s")
        case .dailymotionPlayer: parts.setQuery("startTime", "\(whole)")
        case .opencastPaella: parts.setQuery("time", "\(whole)s")
        case .mediaFile:
            // MediaActivity's own media fragment, once a time fragment the URL had is gone; a URL
            // with another fragment stays as it is (browserURL leaves it alone).
            if parts.fragment.map(isTimeFragment) == true { parts.fragment = nil }
            let built = MediaActivity(url: parts.text, title: "", position: 0, positionTime: 0, rate: 0, playing: false).browserURL(at: seconds)
            return built == parts.text && parts.fragment != nil ? nil : built
        }
        return parts.text
    }

    /// A media fragment's temporal dimension (`t=…`), which a handoff replaces.
    static func isTimeFragment(_ fragment: String) -> Bool { fragment.hasPrefix("t=") || fragment.hasPrefix("t%3D") || fragment.hasPrefix("t%3d") }

    /// A web address split into the pieces the mapping looks at, text kept as it came.
    struct Parts {
        /// "https://" as written.
        var prefix: String
        var authority: String
        var path: String
        var query: String?
        var fragment: String?

        init?(_ url: String) {
            guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { return nil }
            let start = url.index(colon, offsetBy: 3)
            prefix = String(url[..<start])
            var rest = url[start...]
            if let hash = rest.firstIndex(of: "#") {
                fragment = String(rest[rest.index(after: hash)...])
                rest = rest[..<hash]
            }
            if let mark = rest.firstIndex(of: "?") {
                query = String(rest[rest.index(after: mark)...])
                rest = rest[..<mark]
            }
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            authority = String(rest[..<slash])
            path = String(rest[slash...])
            guard !authority.isEmpty else { return nil }
        }

        var text: String {
            var text = prefix + authority + path
            if let query { text += "?" + query }
            if let fragment { text += "#" + fragment }
            return text
        }

        /// The host in lower case, without user information, port or a final dot.
        var host: String {
            var host = Substring(authority.split(separator: "@", omittingEmptySubsequences: false).last ?? "")
            if host.hasPrefix("["), let end = host.firstIndex(of: "]") {
                host = host[...end]
            } else if let colon = host.firstIndex(of: ":") {
                host = host[..<colon]
            }
            if host.hasSuffix(".") { host = host.dropLast() }
            return host.lowercased()
        }

        /// The values of query parameter `name` (exact name, as written).
        func values(_ name: String) -> [Substring] {
            guard let query else { return [] }
            return query.split(separator: "&").compactMap { pair in
                let (key, value) = Self.split(pair)
                return key == name ? value : nil
            }
        }

        func has(_ name: String) -> Bool { values(name).contains { !$0.isEmpty } }

        /// Replaces every `name=` parameter with one `name=value` at the end.
        mutating func setQuery(_ name: String, _ value: String) {
            var pairs = (query ?? "").split(separator: "&").filter { Self.split($0).key != name }.map(String.init)
            pairs.append(name + "=" + value)
            query = pairs.joined(separator: "&")
        }

        static func split(_ pair: Substring) -> (key: Substring, value: Substring) {
            guard let equals = pair.firstIndex(of: "=") else { return (pair, "") }
            return (pair[..<equals], pair[pair.index(after: equals)...])
        }

        var segments: [Substring] { path.split(separator: "/") }

        var site: Site? {
            let host = host
            let segments = segments
            if MediaTimeURL.youTubeHosts.contains(host), path == "/watch", has("v") { return .youTube }
            if host == "youtu.be" || host == "www.youtu.be", segments.count == 1 { return .youTube }
            if MediaTimeURL.youTubeEmbedHosts.contains(host), segments.count == 2, segments[0] == "embed" { return .youTubeEmbed }
            if host == "vimeo.com" || host == "www.vimeo.com", segments.contains(where: Self.isNumber) { return .vimeo }
            if host == "player.vimeo.com", segments.count >= 2, segments[0] == "video", Self.isNumber(segments[1]) { return .vimeo }
            if host == "player.twitch.tv", has("video") { return .twitchPlayer }
            if host == "geo.dailymotion.com", has("video"),
               path == "/player.html" || (segments.count == 2 && segments[0] == "player" && segments[1].hasSuffix(".html")) {
                return .dailymotionPlayer
            }
            if MediaTimeURL.paellaPages.contains(where: { path.hasSuffix($0) }), has("id") { return .opencastPaella }
            if !path.hasSuffix("/"), let last = segments.last?.lowercased(), MediaTimeURL.mediaExtensions.contains(where: { last.hasSuffix($0) && last.count > $0.count }) {
                return .mediaFile
            }
            return nil
        }

        static func isNumber(_ text: Substring) -> Bool { !text.isEmpty && text.allSatisfy { $0.isASCII && $0.isNumber } }
    }
}
