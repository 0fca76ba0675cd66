#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A pretend e-book reader that uses batond over D-Bus (python3-dbus and a GLib main loop).

It publishes the book the user is reading as the current activity, answers the daemon's
ActivitySource1.WillSave with fresh state (the page it is on *now*), and registers an
ActivityHandler1 that prints activities continued from other devices.

    reader.py [--bus session|system|ADDRESS] [--bus-name NAME] [--for SECONDS]

Lines on stdout: "activity PATH" once published, then one line per daemon call.
"""

import argparse
import signal
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

ACTIVITY_TYPE = "org.example.Reader.reading"
MANAGER_PATH = "/org/baton"
SOURCE_PATH = "/org/example/Reader/source"
HANDLER_PATH = "/org/example/Reader/handler"


def say(*words):
    print(*words, flush=True)


def date(seconds):
    """Dates travel as the structure (sd): the tag "date" and seconds since 1970 (UTC)."""
    return dbus.Struct(("date", float(seconds)), signature="sd")


def plain(value):
    """D-Bus values (as received) as plain Python values, for printing."""
    if isinstance(value, dbus.Struct) and len(value) == 2 and value[0] == "date":
        return {"$date": float(value[1])}
    if isinstance(value, (dbus.Array, list)):
        if getattr(value, "signature", None) == "y":
            return bytes(value)
        return [plain(item) for item in value]
    if isinstance(value, (dbus.Dictionary, dict)):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (dbus.Int64, dbus.Int32, dbus.UInt32, dbus.Int16, dbus.UInt16, dbus.Byte)):
        return int(value)
    if isinstance(value, dbus.Double):
        return float(value)
    if isinstance(value, dbus.String):
        return str(value)
    return value


class Book:
    """The app's own state: what is being read and where."""

    def __init__(self):
        self.title = "Dune"
        self.page = 1

    def activity_title(self):
        return f"{self.title}, page {self.page}"

    def user_info(self):
        # Every property-list type, marshalled as docs/dbus-api.md describes.
        return dbus.Dictionary({
            "book": dbus.String(self.title),
            "page": dbus.Int64(self.page),
            "progress": dbus.Double(self.page / 100),
            "bookmarked": dbus.Boolean(True),
            "cover": dbus.ByteArray(b"\x89PNG"),
            "openedAt": date(1795953600),
            "chapters": dbus.Array(["Prologue", "Book One"], signature="s"),
            "position": dbus.Dictionary({"line": dbus.Int64(12), "column": dbus.Int64(3)}, signature="sv"),
        }, signature="sv")


class ActivitySource(dbus.service.Object):
    """org.baton.ActivitySource1: the daemon asks for fresh state before the activity leaves."""

    def __init__(self, bus, book):
        super().__init__(bus, SOURCE_PATH)
        self.book = book

    @dbus.service.method("org.baton.ActivitySource1", in_signature="o", out_signature="a{sv}")
    def WillSave(self, activity):
        self.book.page += 1  # the reader has kept reading since the activity was published
        say("WillSave", str(activity), "-> page", self.book.page)
        return dbus.Dictionary({
            "Title": dbus.String(self.book.activity_title()),
            "UserInfo": self.book.user_info(),
            "Version": dbus.Int64(1),
        }, signature="sv")

    @dbus.service.method("org.baton.ActivitySource1", in_signature="os", out_signature="")
    def WasContinued(self, activity, device):
        say("WasContinued", str(activity), "on", str(device))


class ActivityHandler(dbus.service.Object):
    """org.baton.ActivityHandler1: activities continued here from another device."""

    def __init__(self, bus):
        super().__init__(bus, HANDLER_PATH)

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="ss", out_signature="b")
    def WillContinue(self, activity_type, device):
        say("WillContinue", str(activity_type), "from", str(device))
        return True

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="ssa{sv}a{sv}", out_signature="")
    def Continue(self, activity_type, title, user_info, info):
        say("Continue", str(activity_type), repr(str(title)), plain(user_info), plain(info))

    @dbus.service.method("org.baton.ActivityHandler1", in_signature="sss", out_signature="")
    def FailedToContinue(self, activity_type, error, message):
        say("FailedToContinue", str(activity_type), str(error), str(message))


def connect(bus):
    if bus == "session":
        return dbus.SessionBus()
    if bus == "system":
        return dbus.SystemBus()
    return dbus.bus.BusConnection(bus)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bus", default="session", help="session, system or a D-Bus address (default: session)")
    parser.add_argument("--bus-name", default="org.baton", help="batond's bus name (default: org.baton)")
    parser.add_argument("--for", dest="duration", type=float, help="quit after this many seconds")
    parser.add_argument("--handler-only", action="store_true", help="only continue activities here; publish nothing")
    args = parser.parse_args()

    DBusGMainLoop(set_as_default=True)
    bus = connect(args.bus)
    book = Book()
    source = ActivitySource(bus, book)
    handler = ActivityHandler(bus)
    manager = dbus.Interface(bus.get_object(args.bus_name, MANAGER_PATH), "org.baton.Manager1")

    activity = None
    try:
        if not args.handler_only:
            path = manager.CreateActivity(ACTIVITY_TYPE, book.activity_title(), book.user_info(), dbus.Dictionary({
                "Source": dbus.ObjectPath(SOURCE_PATH),
                "NeedsSave": dbus.Boolean(True),
                "Version": dbus.Int64(1),
                "WebpageURL": dbus.String("https://example.org/books/dune"),
            }, signature="sv"))
            activity = dbus.Interface(bus.get_object(args.bus_name, path), "org.baton.Activity1")
            activity.BecomeCurrent()
        manager.RegisterHandler(dbus.ObjectPath(HANDLER_PATH), dbus.Array([ACTIVITY_TYPE], signature="s"))
    except dbus.exceptions.DBusException as error:
        print(f"reader: {error.get_dbus_name()}: {error.get_dbus_message()}", file=sys.stderr)
        return 1
    if activity is not None:
        say("activity", str(path))
    else:
        say("handler", HANDLER_PATH)

    loop = GLib.MainLoop()
    # A launcher may pass these signals on blocked (threads of the parent had them blocked);
    # unblock them so that GLib's handlers run.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    for number in (signal.SIGINT, signal.SIGTERM):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, number, loop.quit)
    if args.duration is not None:
        GLib.timeout_add(int(args.duration * 1000), loop.quit)
    loop.run()

    # Closing the connection would do the same; saying it keeps the example explicit.
    try:
        if activity is not None:
            activity.Invalidate()
    except dbus.exceptions.DBusException:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
