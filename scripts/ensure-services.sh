#!/usr/bin/env bash
# Start PostgreSQL and Redis when they are not answering (CI and fresh machines).
set -u
pg_up() { (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; }

if ! pg_up; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
if ! redis_up; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
fi
for _ in $(seq 1 30); do
  pg_up && redis_up && exit 0
  sleep 1
done
pg_up || echo "PostgreSQL is not answering on 127.0.0.1:5432" >&2
redis_up || echo "Redis is not answering on 127.0.0.1:6379" >&2
exit 1
