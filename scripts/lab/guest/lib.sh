# Baton lab, guest side: helpers shared by init, restart-bluetoothd and power.
# Sourced (not run) inside the VM only.

# Guest-local state (tmpfs, gone with the VM): bluetoothd's pid and arguments.
LAB_STATE_DIR=/run/baton-lab
BLUETOOTHD=/usr/libexec/bluetooth/bluetoothd

lab_uptime() { cut -d' ' -f1 /proc/uptime; }

bluez_call() { dbus-send --system --print-reply --dest=org.bluez "$@"; }

# Number of /org/bluez/hciN objects bluetoothd currently exports.
exported_adapter_count() {
	bluez_call / org.freedesktop.DBus.ObjectManager.GetManagedObjects 2>/dev/null \
		| grep -cE 'object path "/org/bluez/hci[0-9]+"$' || true
}

# wait_for_adapters COUNT SECONDS: until bluetoothd exports COUNT adapters.
wait_for_adapters() {
	local want=$1 deadline=$(( $(date +%s) + $2 ))
	while [ "$(exported_adapter_count)" -lt "$want" ]; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

adapter_property() { # adapter_property hciK NAME -> value as dbus-send prints it
	bluez_call "/org/bluez/$1" org.freedesktop.DBus.Properties.Get \
		string:org.bluez.Adapter1 "string:$2" 2>/dev/null \
		| sed -n 's/^ *variant *[a-z0-9]* *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p'
}

# set_powered hciK true|false: asks bluetoothd and waits until the property follows.
set_powered() {
	local adapter=$1 state=$2 deadline
	bluez_call "/org/bluez/$adapter" org.freedesktop.DBus.Properties.Set \
		string:org.bluez.Adapter1 string:Powered "variant:boolean:$state" >/dev/null || return 1
	deadline=$(( $(date +%s) + 10 ))
	until [ "$(adapter_property "$adapter" Powered)" = "$state" ]; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# Starts bluetoothd detached (own session, no inherited stdio) with the
# arguments saved at boot, appending to $LAB_RUN_DIR/bluetoothd.log.
start_bluetoothd() {
	local -a bluetoothd_args
	# shellcheck disable=SC1091
	source "$LAB_STATE_DIR/bluetoothd.args"
	# In a non-interactive shell the background child is no process-group
	# leader, so setsid execs in place and $! is bluetoothd's own pid.
	setsid "$BLUETOOTHD" -n "${bluetoothd_args[@]}" </dev/null >>"$LAB_RUN_DIR/bluetoothd.log" 2>&1 &
	echo $! > "$LAB_STATE_DIR/bluetoothd.pid"
}

# bring_up_adapters COUNT: waits for COUNT exported adapters and powers them on.
bring_up_adapters() {
	local count=$1 k
	wait_for_adapters "$count" 30 || { echo "bluetoothd did not export $count adapters" >&2; return 1; }
	for ((k = 0; k < count; k++)); do
		set_powered "hci$k" true || { echo "cannot power on hci$k" >&2; return 1; }
	done
}
