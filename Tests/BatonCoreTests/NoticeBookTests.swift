// SPDX-License-Identifier: GPL-2.0-or-later
import BatonCore
import Testing

@Suite struct NoticeBookTests {
    @Test func aRepeatedNoticeIsCountedNotRepeated() {
        var book = NoticeBook()
        book.note("radio ready", at: 10)
        book.note("pairing advert on the air", at: 11)
        for second in 0..<100 { book.note("advertising on hci0 needs a pause of the scan", at: 20 + Int64(second)) }
        #expect(book.notices.map(\.text) == ["radio ready", "pairing advert on the air", "advertising on hci0 needs a pause of the scan"])
        #expect(book.notices.map(\.count) == [1, 1, 100])
        #expect(book.notices.last?.time == 119)
        #expect(book.lines == ["radio ready", "pairing advert on the air", "advertising on hci0 needs a pause of the scan (×100)"])
    }

    @Test func aRepeatMovesToTheNewestPlace() {
        var book = NoticeBook()
        book.note("a", at: 1)
        book.note("b", at: 2)
        book.note("a", at: 3)
        #expect(book.notices.map(\.text) == ["b", "a"])
        #expect(book.notices.map(\.time) == [2, 3])
        #expect(book.lines == ["b", "a (×2)"])
    }

    @Test func distinctNoticesKeepTheNewest32() {
        var book = NoticeBook()
        for index in 0..<40 { book.note("notice \(index)", at: Int64(index)) }
        #expect(book.notices.count == NoticeBook.capacity)
        #expect(book.notices.first?.text == "notice 8")
        #expect(book.notices.last?.text == "notice 39")
        // An evicted text starts over with a count of one.
        book.note("notice 0", at: 50)
        #expect(book.notices.last == CountedNotice(text: "notice 0", count: 1, time: 50))
        #expect(book.notices.first?.text == "notice 9")
    }
}
