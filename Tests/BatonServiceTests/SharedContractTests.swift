import BatonAPI
import BatonDBus
import Testing
@testable import BatonService

/// Where the daemon still builds a reply by hand, it must build what BatonAPI's typed reply
/// writes and reads (the clients decode with BatonAPI).
@Suite("BatonServiceTests: daemon replies match BatonAPI's typed replies")
struct SharedContractTests {
    @Test func discoverEntriesAreWhatPairingEndpointWrites() throws {
        let daemon = DiscoveredPairing(name: "alpha (abab-abab)", sessionID: "0123456789abcdef", address: "AA:BB:CC:DD:EE:FF",
                                       port: 0, host: "", transport: "ble", psm: 0x81, addressType: "random")
        let typed = try #require(PairingEndpoint(daemon.dbusValue))
        #expect(typed == PairingEndpoint(name: "alpha (abab-abab)", sessionID: "0123456789abcdef", address: "AA:BB:CC:DD:EE:FF",
                                         port: 0, transport: "ble", psm: 0x81, addressType: "random"))
        #expect(typed.dbusValue == daemon.dbusValue)
    }
}
