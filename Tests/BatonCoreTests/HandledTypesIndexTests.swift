import BatonCore
import Testing

@Suite struct HandledTypesIndexTests {
    /// Folders as a fake: file name → declared types; the fingerprint is a change counter.
    struct FakeFolders {
        var files: [String: [String]] = [:]
        var changes = 0
        var reads = 0
        mutating func add(_ name: String, _ types: [String]) { files[name] = types; changes += 1 }
        mutating func read() -> [String] { reads += 1; return files.values.flatMap { $0 } }
    }

    @Test func theFoldersAreReadOnceNotPerLookup() {
        var folders = FakeFolders()
        folders.add("reader.desktop", ["org.example.Reader.reading"])
        var index = HandledTypesIndex<Int>()
        for _ in 0..<100 {
            index.refresh(fingerprint: folders.changes) { folders.read() }
            #expect(index.handles("org.example.Reader.reading"))
            #expect(!index.handles("org.example.Mail.compose"))
        }
        #expect(folders.reads == 1)
        #expect(index.loads == 1)
    }

    @Test func aNewDesktopFileIsFollowed() {
        var folders = FakeFolders()
        folders.add("reader.desktop", ["org.example.Reader.reading"])
        var index = HandledTypesIndex<Int>()
        index.refresh(fingerprint: folders.changes) { folders.read() }
        #expect(!index.handles("org.example.Mail.compose"))
        folders.add("mail.desktop", ["org.example.Mail.compose"])
        #expect(index.refresh(fingerprint: folders.changes) { folders.read() })
        #expect(index.handles("org.example.Mail.compose"))
        #expect(index.allTypes() == ["org.example.Reader.reading", "org.example.Mail.compose"])
        #expect(folders.reads == 2)
    }

    @Test func invalidateRereadsAndRegisteredHandlersCount() {
        var folders = FakeFolders()
        var index = HandledTypesIndex<Int>()
        index.refresh(fingerprint: folders.changes) { folders.read() }
        #expect(!index.handles("org.example.Reader.reading"))
        #expect(index.handles("org.example.Reader.reading", registered: ["org.example.Reader.reading"]))
        // A watch saw an in-place edit the fingerprint cannot see.
        folders.files["reader.desktop"] = ["org.example.Reader.reading"]
        #expect(!index.refresh(fingerprint: folders.changes) { folders.read() })
        index.invalidate()
        #expect(index.refresh(fingerprint: folders.changes) { folders.read() })
        #expect(index.handles("org.example.Reader.reading"))
        #expect(index.allTypes(registered: ["a.b"]) == ["org.example.Reader.reading", "a.b"])
    }
}
