#!/bin/sh
# A broker of the target's own, for [target.broker] start and stop:
#   redis-broker.sh start PORT DATA_DIR          returns once the server answers PING
#   redis-broker.sh stop PORT DATA_DIR SIGNAL    returns once the server has exited
set -eu
cmd=$1 port=$2 dir=$3
case "$cmd" in
start)
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
        --appendonly yes --appendfsync always --save ""
    i=0
    until [ "$(redis-cli -p "$port" ping 2>/dev/null)" = "PONG" ]; do
        i=$((i + 1))
        [ "$i" -lt 500 ] || { echo "redis on $port never answered" >&2; exit 1; }
        sleep 0.01
    done
    ;;
stop)
    pid=$(cat "$dir/redis.pid")
    kill -s "${4#SIG}" "$pid"
    # Until its port is free (a killed server's pid may linger as a zombie).
    i=0
    while redis-cli -p "$port" ping >/dev/null 2>&1 && [ "$i" -lt 500 ]; do
        i=$((i + 1))
        sleep 0.01
    done
    ;;
*)
    echo "usage: redis-broker.sh start|stop PORT DATA_DIR [SIGNAL]" >&2
    exit 2
    ;;
esac
