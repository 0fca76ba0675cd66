// SPDX-License-Identifier: GPL-2.0-or-later
import BatonAgent
import Foundation
import Testing

private let sample = """
    <?xml version="1.0" encoding="UTF-8"?>
    <xbel version="1.0"
          xmlns:bookmark="http://www.freedesktop.org/standards/desktop-bookmarks"
          xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info">
      <bookmark href="file:///home/ann/Documents/Report%202026.pdf" added="2026-11-30T10:00:00.000000Z" modified="2026-11-30T10:00:00.000000Z" visited="2026-11-30T12:30:00.123456Z">
        <info><metadata owner="http://freedesktop.org">
          <mime:mime-type type="application/pdf"/>
          <bookmark:applications><bookmark:application name="Evince" exec="&apos;evince %u&apos;" modified="2026-11-30T12:30:00Z" count="2"/></bookmark:applications>
        </metadata></info>
      </bookmark>
      <bookmark href="https://example.org/remote.pdf" added="2026-11-30T13:00:00Z">
        <info><metadata owner="http://freedesktop.org"><mime:mime-type type="application/pdf"/></metadata></info>
      </bookmark>
      <bookmark href="file:///home/ann/notes.txt" added="2026-11-30T09:00:00Z" modified="2026-11-30T09:00:00Z">
        <info><metadata owner="http://freedesktop.org"><mime:mime-type type="text/plain"/></metadata></info>
      </bookmark>
    </xbel>
    """

private func document(_ path: String, _ type: String = "application/pdf", at seconds: TimeInterval = 0) -> RecentDocument {
    RecentDocument(url: URL(fileURLWithPath: path), mediaType: type, lastUsed: Date(timeIntervalSince1970: seconds))
}

@Suite("BatonAgentTests: the recently-used list and what of it may be offered")
struct RecentDocumentsTests {
    @Test func localEntriesAreReadWithTypeAndLatestUse() throws {
        let documents = RecentDocumentsList.parse(Data(sample.utf8))
        #expect(documents.map(\.url.path) == ["/home/ann/Documents/Report 2026.pdf", "/home/ann/notes.txt"])
        #expect(documents.map(\.mediaType) == ["application/pdf", "text/plain"])
        let visited = try #require(RecentDocumentsList.date("2026-11-30T12:30:00.123456Z"))
        #expect(documents[0].lastUsed == visited)
        #expect(documents[0].displayName == "Report 2026.pdf")
    }

    @Test func aHalfWrittenListGivesWhatWasComplete() {
        let cut = String(sample.prefix(upTo: sample.range(of: "<bookmark href=\"file:///home/ann/notes.txt\"")!.upperBound))
        #expect(RecentDocumentsList.parse(Data(cut.utf8)).map(\.url.path) == ["/home/ann/Documents/Report 2026.pdf"])
        #expect(RecentDocumentsList.parse(Data([0xff, 0xfe, 0x00])).isEmpty)
    }

    @Test func referencesCommentsAndSkippedSectionsAreReadAsXMLDoes() {
        let list = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE xbel>
            <xbel version="1.0" xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info">
              <!-- <bookmark href="file:///home/ann/commented.pdf" added="2026-11-30T10:00:00Z"></bookmark> -->
              <bookmark href='file:///home/ann/R&amp;D%20plan.pdf' added="2026-11-30T10:00:00Z" >
                <info><metadata><![CDATA[ <bookmark href="file:///home/ann/cdata.pdf"> ]]>
                <mime:mime-type type="application/&#x70;df" /></metadata></info>
              </bookmark>
              <bookmark href="file:///home/ann/a&#x25;20b&#46;txt" added="2026-11-30T11:00:00Z"></bookmark>
            </xbel>
            """
        let documents = RecentDocumentsList.parse(Data(list.utf8))
        #expect(documents.map(\.url.path) == ["/home/ann/R&D plan.pdf", "/home/ann/a b.txt"])
        #expect(documents.map(\.mediaType) == ["application/pdf", "application/octet-stream"])
        #expect(documents.first?.lastUsed == RecentDocumentsList.date("2026-11-30T10:00:00Z"))
    }

    @Test(arguments: [
        "<bookmark href=\"file:///home/ann/b.pdf\" added=\"2026-11-30T10:00:00Z\"></bookmarks>",  // close does not match
        "<bookmark href=\"file:///home/ann/b&nbsp;.pdf\"></bookmark>",  // an entity XML does not define
        "<bookmark href=\"file:///home/ann/b.pdf\" href=\"file:///x\"></bookmark>",  // a repeated attribute
        "<bookmark href=\"file:///home/ann/b.pdf\"added=\"x\"></bookmark>",  // attributes not apart
        "<bookmark href=\"file:///home/ann/b.pdf\" added></bookmark>",  // an attribute without value
        "<bookmark href=\"file:///home/ann/b.pdf",  // cut off
        "<!-- never closed <bookmark href=\"file:///home/ann/b.pdf\"></bookmark>",
    ])
    func damageEndsTheListAfterTheEntriesBeforeIt(damage: String) {
        let list = "<xbel><bookmark href=\"file:///home/ann/a.pdf\"></bookmark>" + damage
            + "<bookmark href=\"file:///home/ann/c.pdf\"></bookmark></xbel>"
        #expect(RecentDocumentsList.parse(Data(list.utf8)).map(\.url.path) == ["/home/ann/a.pdf"])
    }

    @Test(arguments: ["/home/ann/.ssh/id.pdf", "/home/ann/.cache/x.pdf", "/home/ann/Documents/.hidden.pdf",
                      "/media/ann/USB/a.pdf", "/run/media/ann/USB/a.pdf", "/mnt/share/a.pdf", "/tmp/a.pdf",
                      "/var/tmp/a.pdf", "/run/user/1000/doc/a.pdf", "/home/ann/../../tmp/a.pdf"])
    func hiddenPrivateAndRemovablePlacesAreNeverOffered(path: String) {
        #expect(!RecentDocumentFilter().accepts(document(path)))
    }

    @Test func onlyChosenMediaTypesAreOffered() {
        let filter = RecentDocumentFilter(mediaTypes: ["application/pdf"])
        #expect(filter.accepts(document("/home/ann/Documents/a.pdf")))
        #expect(!filter.accepts(document("/home/ann/Documents/a.txt", "text/plain")))
        #expect(RecentDocumentFilter().accepts(document("/srv/docs/plan.odt", "application/vnd.oasis.opendocument.text")))
        #expect(!RecentDocumentFilter().accepts(document("/home/ann/run.sh", "application/x-shellscript")))
    }

    @Test func onlyANewerDocumentThanTheLastOfferedIsOffered() {
        let filter = RecentDocumentFilter()
        let list = [document("/home/ann/a.pdf", at: 100), document("/home/ann/b.pdf", at: 200), document("/tmp/c.pdf", at: 300)]
        #expect(filter.newest(in: list, after: nil)?.url.path == "/home/ann/b.pdf")
        #expect(filter.newest(in: list, after: Date(timeIntervalSince1970: 200)) == nil)
        #expect(filter.newest(in: list, after: Date(timeIntervalSince1970: 150))?.url.path == "/home/ann/b.pdf")
    }
}
