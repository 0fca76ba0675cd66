// swift-tools-version:6.0
// SPDX-License-Identifier: GPL-2.0-or-later
// Baton: Handoff for Linux. No outside Swift packages; C libraries come from Debian.
import PackageDescription

let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]
// The daemon-only modules in release: every function in its own section, also the ones LLVM creates
// (async continuations, coroutine parts, merged functions), which otherwise share one .text per
// file that the start-up order (batond's linker settings) cannot take apart. Not on the modules
// that apps link through the BatonClient product: SwiftPM refuses a product whose targets carry
// unsafe flags as a versioned dependency of another package.
let daemonSections: [SwiftSetting] = strict + [.unsafeFlags(["-Xfrontend", "-function-sections"],
                                                            .when(platforms: [.linux], configuration: .release))]
// The modules batond shares with the BatonClient product get function sections only in the release
// builds of this tree's scripts (scripts/install, hence the Debian package, and
// scripts/profile-startup-order set BATON_DAEMON_LAYOUT=1): about 0.2-0.4 MiB less of batond's text
// resident after start (docs/benchmarks.md). Without it, as for a package depending on BatonClient,
// they carry no unsafe flag.
let sharedSections: [SwiftSetting] = Context.environment["BATON_DAEMON_LAYOUT"] == "1" ? daemonSections : strict

let package = Package(
    name: "Baton",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "batond", targets: ["batond"]),
        .executable(name: "baton", targets: ["baton"]),
        .executable(name: "bt-pair", targets: ["bt-pair"]),
        .executable(name: "baton-agent", targets: ["baton-agent"]),
        .executable(name: "baton-browser-host", targets: ["baton-browser-host"]),
        .library(name: "BatonClient", targets: ["BatonClient", "BatonAPI"]),
    ],
    targets: [
        // C libraries from Debian packages.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // Header-only: descriptor passing on the bus socket (BatonDBus speaks D-Bus itself).
        .systemLibrary(name: "CBusSocket"),
        // Header-only: the L2CAP socket address and constants. batond calls nothing in libbluetooth,
        // so nothing links it (one shared library less to load, docs/benchmarks.md).
        .systemLibrary(name: "CBluetooth", providers: [.apt(["libbluetooth-dev"])]),
        .systemLibrary(name: "CGio", pkgConfig: "gio-unix-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // libxcb and XFixes: the session clipboard on X11 (BatonX11).
        .systemLibrary(name: "CXCB", providers: [.apt(["libxcb1-dev", "libxcb-xfixes0-dev"])]),

        // Pure layers: no I/O.
        .target(name: "BatonCrypto", dependencies: ["COpenSSL"], swiftSettings: sharedSections),
        .target(name: "BatonCore", dependencies: ["BatonCrypto"], swiftSettings: sharedSections),

        // Adapters at the edges.
        // Dispatch sources that never watch a socket directly (libdispatch's hang-up race).
        .systemLibrary(name: "CEpoll"),
        // The owned file descriptor and the one EINTR retry every module's reads and writes go through.
        .systemLibrary(name: "CMemfd"),
        .target(name: "BatonSystem", dependencies: ["CMemfd"], swiftSettings: sharedSections),
        .target(name: "BatonReadiness", dependencies: ["CEpoll", "BatonSystem"], swiftSettings: sharedSections),
        .target(name: "BatonDBus", dependencies: ["CBusSocket", "BatonReadiness", "BatonSystem"], swiftSettings: sharedSections),
        // The one JSON parser: the state files' coder and the tools' and browser host's input.
        .target(name: "BatonJSON", dependencies: ["BatonCore"], swiftSettings: sharedSections),
        .target(name: "BatonStore", dependencies: ["BatonCrypto", "BatonSystem", "BatonJSON"], swiftSettings: daemonSections),
        .target(name: "BatonTransport", dependencies: ["BatonCore", "BatonCrypto", "COpenSSL", "CBluetooth", "BatonReadiness", "BatonSystem"], swiftSettings: daemonSections),
        .target(name: "BatonBlueZ", dependencies: ["BatonCore", "BatonDBus"], swiftSettings: daemonSections),
        .target(name: "BatonAvahi", dependencies: ["BatonCore", "BatonDBus"], swiftSettings: daemonSections),
        // The D-Bus contract (names, errors, value coding, typed replies) shared by daemon and clients.
        .target(name: "BatonAPI", dependencies: ["BatonCore", "BatonDBus"], swiftSettings: sharedSections),
        .target(name: "BatonService", dependencies: ["BatonAPI", "BatonCore", "BatonCrypto", "BatonDBus", "BatonStore", "BatonBlueZ", "BatonAvahi", "BatonTransport", "BatonSystem", "CBusSocket"], swiftSettings: daemonSections),
        .target(name: "BatonClient", dependencies: ["BatonAPI", "BatonDBus", "BatonCore", "BatonSystem"], swiftSettings: strict),
        // What both command-line tools share: subcommands, argument parsing, output, JSON.
        .target(name: "BatonCommandLine", dependencies: ["BatonClient", "BatonAPI", "BatonCore", "BatonDBus", "BatonSystem", "BatonJSON"], swiftSettings: strict),

        // The per-user session agent: notifications for suggestions, app launching in the session.
        .target(name: "BatonAgent", dependencies: ["BatonPublishers", "BatonX11", "BatonWayland", "BatonClient", "BatonAPI", "BatonCommandLine", "BatonDBus", "BatonSystem", "CGio"], swiftSettings: strict),

        // Which of the app-independent publishers the user turned on (publishers.conf).
        .target(name: "BatonPublishers", dependencies: ["BatonSystem"], swiftSettings: strict),
        // The session clipboard on X11 (SessionClipboard over libxcb): selections, INCR, XFixes.
        .target(name: "BatonX11", dependencies: ["BatonPublishers", "BatonReadiness", "CXCB"], swiftSettings: strict),
        // The session clipboard on Wayland (SessionClipboard over ext/wlr data control): the wire
        // protocol spoken directly on the compositor's socket, no libwayland.
        .target(name: "BatonWayland", dependencies: ["BatonPublishers", "BatonReadiness", "BatonSystem", "CBusSocket"], swiftSettings: strict),
        // The browser extension's native messaging host: framing, page messages, the activity.
        .target(name: "BatonBrowserHost", dependencies: ["BatonPublishers", "BatonClient", "BatonAPI", "BatonCore", "BatonCommandLine", "BatonDBus", "BatonSystem", "BatonJSON"], swiftSettings: strict),

        // Thin executables that only wire things together.
        // The release daemon links the Swift runtime statically: only the pages it touches become
        // resident (idle RSS, docs/benchmarks.md). Allowed for a root package's executable.
        .executableTarget(name: "batond", dependencies: ["BatonService", "BatonReadiness"], exclude: ["startup-order.txt", "private-functions.ld", "link"],
                          swiftSettings: daemonSections,
                          linkerSettings: [.unsafeFlags(["-static-stdlib",
                                                          // lld packs the ~40,000 relative relocations (R_X86_64_RELATIVE) into
                                                          // a small RELR table: PIE stays, the start reads less of the binary.
                                                          "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                                                          "-Xlinker", "--gc-sections", "-Xlinker", "--as-needed",
                                                          // The few pieces of libstdc++ the Swift runtime uses (strings, hash
                                                          // tables, operator new) are linked in: loading the shared library
                                                          // kept 1.0 MiB resident for them. The toolchain names -lstdc++
                                                          // itself, so a linker script found first stands for it (link/).
                                                          "-L\(Context.packageDirectory)/Sources/batond/link",
                                                          // Nothing needs batond's own symbols at run time (dlsym);
                                                          // without them the loader reads 0.4 MiB less.
                                                          "-Xlinker", "--no-export-dynamic",
                                                          // The functions run from exec until idle, linked next to each
                                                          // other: fewer 64 KiB fault-around windows of text resident.
                                                          // scripts/profile-startup-order writes the file; names gone
                                                          // since only make the order less good. Absolute paths, so
                                                          // that the link finds them from any working directory.
                                                          "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/batond/startup-order.txt",
                                                          "-Xlinker", "--no-warn-symbol-ordering",
                                                          "-Xlinker", "--script=\(Context.packageDirectory)/Sources/batond/private-functions.ld"],
                                                         .when(platforms: [.linux], configuration: .release))]),
        // The two command lines' subcommands; their executables' main.swift is left out.
        .target(name: "BatonTool", dependencies: ["BatonPublishers", "BatonWayland", "BatonCommandLine", "BatonClient", "BatonAPI", "BatonCore", "BatonDBus"],
                path: "Sources/baton", exclude: ["main.swift"], swiftSettings: strict),
        .target(name: "BtPairTool", dependencies: ["BatonCommandLine", "BatonClient", "BatonAPI", "BatonCore", "BatonDBus"],
                path: "Sources/bt-pair", exclude: ["main.swift"], swiftSettings: strict),
        // The installed client binary: baton, and bt-pair, baton-agent and baton-browser-host as links
        // to it, chosen by argv[0] (one copy of the Swift runtime and FoundationEssentials instead of
        // four, docs/benchmarks.md). The separate executables below are for development and tests.
        .executableTarget(name: "baton", dependencies: ["BatonTool", "BtPairTool", "BatonAgent", "BatonBrowserHost", "BatonReadiness"],
                          path: "Sources/baton", sources: ["main.swift"], swiftSettings: strict),
        .executableTarget(name: "bt-pair", dependencies: ["BtPairTool", "BatonCommandLine"],
                          path: "Sources/bt-pair", sources: ["main.swift"], swiftSettings: strict),
        .executableTarget(name: "baton-agent", dependencies: ["BatonAgent", "BatonReadiness"], swiftSettings: strict),
        .executableTarget(name: "baton-browser-host", dependencies: ["BatonBrowserHost"], swiftSettings: strict),
        // Benchmarks: no products (SwiftPM runs them by name all the same, `swift run -c release baton-bench`).
        .executableTarget(name: "baton-bench", dependencies: ["BatonCore", "BatonCrypto"], path: "Benchmarks/baton-bench", swiftSettings: strict),
        // Accept → delivered over loopback TLS, two rings in one process (docs/benchmarks.md).
        .executableTarget(name: "baton-continue-bench", dependencies: ["BatonService", "BatonAPI", "BatonStore", "BatonCore"], path: "Benchmarks/baton-continue-bench",
                          swiftSettings: strict),
        // A 1 GiB document over pinned TLS on loopback against raw TCP (docs/benchmarks.md).
        .executableTarget(name: "baton-bench-documents", dependencies: ["BatonService", "BatonStore", "BatonTransport", "BatonCore", "BatonCrypto", "BatonReadiness"],
                          path: "Benchmarks/baton-bench-documents", swiftSettings: strict),
        // Test helper: writes a counter record until SIGKILLed (BatonStoreTests fault injection).
        .executableTarget(name: "baton-store-torture", dependencies: ["BatonStore"], path: "Tests/Support/baton-store-torture", swiftSettings: strict),
        // Test helper: one step of an edit-session claim per run, SIGKILLed at random (EditSessionTortureTests).
        .executableTarget(name: "baton-docsync-torture", dependencies: ["BatonService", "BatonStore", "BatonCore", "BatonCrypto"],
                          path: "Tests/Support/baton-docsync-torture", swiftSettings: strict),

        // Test support: a private dbus-daemon per test, shared by the suites that need one.
        // Test support: starts dbus-broker with posix_spawn (closefrom in the child), see TestBus.
        .systemLibrary(name: "CTestSpawn", path: "Tests/Support/CTestSpawn"),
        // A stand-in Wayland compositor for what headless sway cannot show (ext-data-control, none, broken bytes).
        .target(name: "BatonWaylandFakes", path: "Tests/Support/BatonWaylandFakes", swiftSettings: strict),
        .target(name: "BatonTestBus", dependencies: ["CTestSpawn"], path: "Tests/Support/BatonTestBus", swiftSettings: strict),
        // Test support: a private Xvfb per test and xclip as the other client (posix_spawn, closefrom).
        // Test support: a private headless sway per test and wl-clipboard as the other client.
        .target(name: "BatonSpawn", dependencies: ["CTestSpawn"], path: "Tests/Support/BatonSpawn", swiftSettings: strict),
        .target(name: "BatonSway", dependencies: ["BatonSpawn"], path: "Tests/Support/BatonSway", swiftSettings: strict),
        .target(name: "BatonXvfb", dependencies: ["BatonSpawn"], path: "Tests/Support/BatonXvfb", swiftSettings: strict),
        .target(name: "BatonMutter", dependencies: ["BatonSpawn", "BatonSway", "BatonXvfb", "BatonWayland", "CTestSpawn"], path: "Tests/Support/BatonMutter",
                swiftSettings: strict),
        // Test support: fakes of BatonService's ports (radio, activities, suggestion board), named as fakes.
        .target(name: "BatonServiceFakes", dependencies: ["BatonService", "BatonAPI", "BatonStore", "BatonCore", "BatonCrypto", "BatonSystem"], path: "Tests/Support/BatonServiceFakes",
                swiftSettings: strict),

        .testTarget(name: "BatonSystemTests", dependencies: ["BatonSystem"], swiftSettings: strict),
        .testTarget(name: "BatonCryptoTests", dependencies: ["BatonCrypto"], swiftSettings: strict),
        .testTarget(name: "BatonCoreTests", dependencies: ["BatonCore", "BatonCrypto"], resources: [.copy("Vectors")], swiftSettings: strict),
        // Links libbluetooth itself: its str2ba is the reference the address parser is checked against.
        .testTarget(name: "BatonTransportTests", dependencies: ["BatonTestBus", "BatonTransport", "BatonReadiness", "BatonCore", "BatonCrypto", "COpenSSL"],
                    // The tests drive libssl directly as a peer would; batond itself loads it at run time.
                    swiftSettings: strict, linkerSettings: [.linkedLibrary("bluetooth"), .linkedLibrary("ssl")]),
        .testTarget(name: "BatonJSONTests", dependencies: ["BatonJSON"], swiftSettings: strict),
        .testTarget(name: "BatonStoreTests", dependencies: ["BatonStore", "BatonTestBus"], swiftSettings: strict),
        .testTarget(name: "BatonDBusTests", dependencies: ["BatonTestBus", "BatonDBus"], swiftSettings: strict),
        .testTarget(name: "BatonAPITests", dependencies: ["BatonAPI", "BatonCore", "BatonDBus"], swiftSettings: strict),
        .testTarget(name: "BatonServiceTests", dependencies: ["BatonTestBus", "BatonXvfb", "BatonSway", "BatonMutter", "BatonX11", "BatonPublishers", "BatonServiceFakes", "BatonAPI", "BatonService", "BatonClient", "BatonDBus", "BatonCore", "BatonAgent", "BatonBlueZ", "BatonSystem"], swiftSettings: strict),
        .testTarget(name: "BatonPublishersTests", dependencies: ["BatonPublishers"], swiftSettings: strict),
        // Against a real Xvfb per test and real xclip as the other client.
        .testTarget(name: "BatonX11Tests", dependencies: ["BatonX11", "BatonPublishers", "BatonSpawn", "BatonXvfb", "BatonMutter", "CXCB", "CTestSpawn"], swiftSettings: strict),
        // Against a real headless sway per test and real wl-clipboard as the other client.
        .testTarget(name: "BatonWaylandTests", dependencies: ["BatonWayland", "BatonWaylandFakes", "BatonSway", "BatonPublishers", "CTestSpawn"], swiftSettings: strict),
        .testTarget(name: "BatonBrowserHostTests", dependencies: ["BatonBrowserHost", "BatonClient", "BatonCore"],
                    swiftSettings: strict),
        .testTarget(name: "BatonAgentTests", dependencies: ["BatonTestBus", "BatonAgent", "BatonPublishers", "BatonClient", "BatonAPI", "BatonCore", "BatonDBus"], swiftSettings: strict),
        .testTarget(name: "BatonClientTests", dependencies: ["BatonTestBus", "BatonSway", "BatonWaylandFakes", "BatonPublishers", "BatonSystem", "BatonAPI", "BatonCommandLine", "BatonClient", "BatonService", "BatonDBus", "BatonCore"], swiftSettings: strict),
        .testTarget(name: "BatonAvahiTests", dependencies: ["BatonTestBus", "BatonAvahi", "BatonCore", "BatonCrypto", "BatonDBus"], swiftSettings: strict),
        .testTarget(name: "BatonLabTests", dependencies: ["BatonTestBus", "BatonBlueZ", "BatonService", "BatonDBus", "BatonCore", "BatonX11", "BatonPublishers"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
