#!/usr/bin/env bash
# Start (or stop) a standalone ZooKeeper on 127.0.0.1:2181 for the snowflake/zkworker tests.
#
#   bash .ci/zookeeper.sh          install Debian's zookeeper if missing, start it (unless a server answers), wait until it answers
#   bash .ci/zookeeper.sh stop     stop the server this script started
#
# Idempotent: a server already answering on the port is left alone. Data lives under /tmp, so every
# machine starts from an empty tree. Override the port with LEAF_ZK_PORT.
set -euo pipefail

PORT="${LEAF_ZK_PORT:-2181}"
BASE="/tmp/leaf-zookeeper-${PORT}"
CFG="${BASE}/zoo.cfg"
PIDFILE="${BASE}/zookeeper.pid"
LOG="${BASE}/zookeeper.log"

answers() (
	# A TCP connect plus ZooKeeper's four-letter "ruok" (whitelisted in zoo.cfg below). A server that
	# does not allow ruok still counts as up when the port accepts a connection. Runs in a subshell so
	# the descriptor and the silenced stderr do not leak into the script.
	exec 2>/dev/null
	exec 3<>"/dev/tcp/127.0.0.1/${PORT}" || exit 1
	printf 'ruok' >&3 || true
	reply=""
	read -r -t 2 -n 4 reply <&3 || true
	[[ -z "${reply}" || "${reply}" == "imok" ]]
)

stop() {
	if [[ -f "${PIDFILE}" ]]; then
		local pid
		pid="$(cat "${PIDFILE}")"
		if kill -0 "${pid}" 2>/dev/null; then
			kill "${pid}"
			for _ in $(seq 1 50); do
				kill -0 "${pid}" 2>/dev/null || break
				sleep 0.1
			done
			kill -0 "${pid}" 2>/dev/null && kill -9 "${pid}" || true
		fi
		rm -f "${PIDFILE}"
		echo "zookeeper: stopped (pid ${pid})"
	else
		echo "zookeeper: no pid file at ${PIDFILE}; nothing to stop"
	fi
}

install() {
	if [[ -d /usr/share/zookeeper ]] || compgen -G "/usr/share/java/zookeeper*.jar" >/dev/null; then
		return 0
	fi
	echo "zookeeper: installing the Debian package"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq zookeeper >/dev/null
}

start() {
	# Installed even when some other server answers on the port: the fault
	# tests start private ZooKeepers from the package's jars.
	install
	if answers; then
		echo "zookeeper: already answering on 127.0.0.1:${PORT}"
		return 0
	fi
	mkdir -p "${BASE}/data"
	cat >"${CFG}" <<EOF
tickTime=2000
initLimit=10
syncLimit=5
dataDir=${BASE}/data
clientPort=${PORT}
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,srvr
autopurge.purgeInterval=0
EOF
	# Debian's own log4j/logback config lives in /etc/zookeeper/conf; the jars in /usr/share/java.
	local cp="/etc/zookeeper/conf:/usr/share/java/*"
	nohup java -Xmx256m -Dzookeeper.log.dir="${BASE}" -Dzookeeper.root.logger=INFO,CONSOLE \
		-cp "${cp}" org.apache.zookeeper.server.quorum.QuorumPeerMain "${CFG}" >"${LOG}" 2>&1 &
	echo $! >"${PIDFILE}"
	for _ in $(seq 1 150); do
		if answers; then
			echo "zookeeper: up on 127.0.0.1:${PORT} (pid $(cat "${PIDFILE}"), data ${BASE}/data)"
			return 0
		fi
		if ! kill -0 "$(cat "${PIDFILE}")" 2>/dev/null; then
			echo "zookeeper: process exited; last log lines:" >&2
			tail -n 30 "${LOG}" >&2 || true
			return 1
		fi
		sleep 0.2
	done
	echo "zookeeper: did not answer on 127.0.0.1:${PORT} within 30 s; last log lines:" >&2
	tail -n 30 "${LOG}" >&2 || true
	return 1
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 [start|stop]" >&2
	exit 2
	;;
esac
