# SPDX-License-Identifier: GPL-2.0-or-later
# Baton lab, guest side: helpers shared by init, restart-bluetoothd and power.
# Sourced (not run) inside the VM only.

# Guest-local state (tmpfs, gone with the VM): bluetoothd's pid and arguments.
LAB_STATE_DIR=/run/baton-lab
BLUETOOTHD=/usr/libexec/bluetooth/bluetoothd

# The bluetoothd to start: the installed one, or (scripts/lab/run --bluez trixie) another
# release's, run with its root's own loader and libraries (saved at boot in bluez.root).
bluetoothd_command() {
	local root
	root=$(cat "$LAB_STATE_DIR/bluez.root" 2>/dev/null)
	if [ -n "$root" ]; then
		echo "$root/lib64/ld-linux-x86-64.so.2"
		echo --library-path
		echo "$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu"
		echo "$root$BLUETOOTHD"
	else
		echo "$BLUETOOTHD"
	fi
}

lab_uptime() { local up _; read -r up _ < /proc/uptime; echo "$up"; }

# Polling must stay cheap: under TCG every fork+exec costs tens of
# milliseconds of guest CPU, which btvirt needs to answer the kernel in time.
# nap SECONDS sleeps without forking, by reading from a FIFO nobody writes to.
nap() {
	if [ -z "${nap_fd:-}" ]; then
		mkdir -p "$LAB_STATE_DIR"
		[ -p "$LAB_STATE_DIR/nap" ] || mkfifo "$LAB_STATE_DIR/nap"
		exec {nap_fd}<>"$LAB_STATE_DIR/nap"
	fi
	read -r -t "$1" -u "$nap_fd" _ || true
}

bluez_call() { dbus-send --system --print-reply --dest=org.bluez "$@"; }

# Number of /org/bluez/hciN objects bluetoothd currently exports.
exported_adapter_count() {
	bluez_call / org.freedesktop.DBus.ObjectManager.GetManagedObjects 2>/dev/null \
		| grep -cE 'object path "/org/bluez/hci[0-9]+"$' || true
}

# True once the kernel gave up initialising a controller (its HCI command timed out).
controller_init_failed() { dmesg | grep -qE 'Bluetooth: hci[0-9]+: Opcode 0x[0-9a-f]+ failed: -110'; }

# wait_for_adapters COUNT SECONDS: until bluetoothd exports COUNT adapters.
wait_for_adapters() {
	local want=$1 deadline=$((SECONDS + $2)) round=0
	while [ "$(exported_adapter_count)" -lt "$want" ]; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		round=$((round + 1))
		if [ $((round % 5)) = 0 ] && controller_init_failed; then
			echo "a controller failed to initialise: $(dmesg | grep -E 'Opcode.*failed' | tail -n 1)" >&2
			return 1
		fi
		nap 0.2
	done
}

adapter_property() { # adapter_property hciK NAME -> value as dbus-send prints it
	bluez_call "/org/bluez/$1" org.freedesktop.DBus.Properties.Get \
		string:org.bluez.Adapter1 "string:$2" 2>/dev/null \
		| sed -n 's/^ *variant *[a-z0-9]* *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p'
}

# set_powered hciK true|false: asks bluetoothd until the Powered property
# shows the wanted state. A Set while bluetoothd is itself powering the adapter
# (AutoEnable, just after start) is answered with org.bluez.Error.Busy, hence
# the retries.
set_powered() {
	local adapter=$1 state=$2 deadline=$((SECONDS + 15))
	until [ "$(adapter_property "$adapter" Powered)" = "$state" ]; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		bluez_call "/org/bluez/$adapter" org.freedesktop.DBus.Properties.Set \
			string:org.bluez.Adapter1 string:Powered "variant:boolean:$state" >/dev/null 2>&1 \
			|| nap 0.2
	done
}

# Starts bluetoothd detached (own session, no inherited stdio) with the
# arguments saved at boot, appending to $LAB_RUN_DIR/bluetoothd.log.
start_bluetoothd() {
	local -a bluetoothd_args command
	# shellcheck disable=SC1091
	source "$LAB_STATE_DIR/bluetoothd.args"
	mapfile -t command < <(bluetoothd_command)
	# The subshell closes every inherited descriptor above 2 first: a caller's
	# pipe held open by bluetoothd would keep that caller waiting for EOF forever.
	# In a non-interactive shell the background child is no process-group
	# leader, so setsid execs in place and $! is bluetoothd's own pid.
	(
		for fd_path in /proc/self/fd/*; do
			fd=${fd_path##*/}
			[ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
		done
		exec setsid "${command[@]}" -n "${bluetoothd_args[@]}" </dev/null >>"$LAB_RUN_DIR/bluetoothd.log" 2>&1
	) &
	echo $! > "$LAB_STATE_DIR/bluetoothd.pid"
	disown $!
}

# bring_up_adapters COUNT: waits for COUNT exported adapters and powers them on.
bring_up_adapters() {
	local count=$1 k
	wait_for_adapters "$count" 20 || { echo "bluetoothd did not export $count adapters" >&2; return 1; }
	for ((k = 0; k < count; k++)); do
		set_powered "hci$k" true || { echo "cannot power on hci$k" >&2; return 1; }
	done
}

controller_count() {
	local controllers=(/sys/class/bluetooth/hci[0-9]*)
	if [ -e "${controllers[0]}" ]; then echo "${#controllers[@]}"; else echo 0; fi
}

# start_bluez_stack COUNT: btvirt with COUNT LE-only controllers in one shared
# emulated radio, then bluetoothd, then all adapters powered. Returns non-zero
# (with the reason on stderr) if any step does not complete.
start_bluez_stack() {
	local count=$1 _
	dmesg -C
	btvirt -L "-l$count" >>"$LAB_RUN_DIR/btvirt.log" 2>&1 &
	echo $! > "$LAB_STATE_DIR/btvirt.pid"
	disown $!
	for _ in $(seq 200); do
		[ "$(controller_count)" -ge "$count" ] && break
		nap 0.05
	done
	[ "$(controller_count)" -ge "$count" ] || { echo "btvirt did not create $count controllers" >&2; return 1; }
	start_bluetoothd
	bring_up_adapters "$count"
}

# Stops bluetoothd and btvirt and waits until the virtual controllers are gone.
stop_bluez_stack() {
	local pid _
	for pid in "$(cat "$LAB_STATE_DIR/bluetoothd.pid" 2>/dev/null)" "$(cat "$LAB_STATE_DIR/btvirt.pid" 2>/dev/null)"; do
		[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	done
	for _ in $(seq 100); do
		[ "$(controller_count)" -eq 0 ] && break
		nap 0.05
	done
}

# The system bus as dbus-broker (scripts/lab/run --bus broker). There is no systemd in the VM:
# dbus-broker-launch --scope system takes its listening socket the way systemd's socket
# activation passes it (LISTEN_FDS=1, LISTEN_PID, descriptor 3), reads
# a system.conf (and system.d: bluetoothd's policy; <listen> there is ignored),
# connects to the bus it serves as its own client at /run/dbus/system_bus_socket, and logs to
# the journal's socket, which it needs: a sink here keeps the MESSAGE= lines in
# $LAB_RUN_DIR/dbus-broker.log. Both run as children of init for the life of the VM.
# The configuration is Debian's system.conf without its service directories: dbus-broker
# activates a service by asking systemd to start its unit, and without systemd such a request
# is never answered, so a call to a name that is not running but activatable (org.freedesktop.Avahi,
# org.bluez while restart-bluetoothd has it down) hung until the caller's timeout (batond's
# start waited 10 s for Avahi) instead of failing at once with ServiceUnknown, as dbus-daemon
# here and systemd on a real machine answer.
start_dbus_broker() {
	mkdir -p /run/systemd/journal /run/dbus "$LAB_STATE_DIR"
	sed -e '/<standard_system_servicedirs\/>/d' -e '/<servicedir>/d' \
		-e 's|<includedir>system.d</includedir>|<includedir>/usr/share/dbus-1/system.d</includedir>|' \
		-e '/<include if_selinux_enabled/d' \
		/usr/share/dbus-1/system.conf > "$LAB_STATE_DIR/dbus-broker-system.conf" || return 1
	# Binds before it returns (the parent exits once the socket is there); the child serves.
	python3 - "$LAB_RUN_DIR/dbus-broker.log" <<'PY' || return 1
import os, socket, sys
sink = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sink.bind("/run/systemd/journal/socket")
os.chmod("/run/systemd/journal/socket", 0o666)
if os.fork() == 0:
    log = open(sys.argv[1], "a")
    while True:
        entry = sink.recv(1 << 16).decode("utf-8", "replace")
        for line in entry.split("\n"):
            if line.startswith("MESSAGE="):
                log.write(line[len("MESSAGE="):] + "\n")
                log.flush()
PY
	LAB_BROKER_CONFIG="$LAB_STATE_DIR/dbus-broker-system.conf" python3 - <<'PY' &
import os, socket
path = "/run/dbus/system_bus_socket"
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
os.chmod(path, 0o666)
listener.listen(128)
fd = listener.detach()
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.set_inheritable(3, True)
os.environ.update(LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
os.execv("/usr/bin/dbus-broker-launch", ["dbus-broker-launch", "--scope", "system", "--config-file", os.environ["LAB_BROKER_CONFIG"]])
PY
	local i
	for ((i = 0; i < 300; i++)); do
		dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId >/dev/null 2>&1 && return 0
		nap 0.1
	done
	return 1
}
