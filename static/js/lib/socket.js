/* A WebSocket to this site that reconnects with backoff (500 ms doubling up to `maxRetryMs`).
 * A close code 4400-4499 is the server's refusal (login, permission): no reconnect.
 *
 *   const sock = openSocket("/ws/instances/7/", { onMessage, onState });
 *   sock.connected; sock.stop();
 * onState(state, text): "connecting" | "live" (set by the caller's onMessage) | "offline" | "refused".
 */

export function openSocket(path, { onMessage, onState, maxRetryMs = 4000 }) {
  const sock = { connected: false, stopped: false, socket: null, retryMs: 500 };

  function connect() {
    if (sock.stopped) return;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + path);
    sock.socket = ws;
    if (onState) onState("connecting", "connecting…");
    ws.onopen = () => { sock.retryMs = 500; };
    ws.onmessage = (msg) => onMessage(JSON.parse(msg.data), sock);
    ws.onclose = (e) => {
      sock.connected = false;
      if (sock.socket === ws) sock.socket = null;
      if (e.code >= 4400 && e.code < 4500) { sock.stopped = true; return; }
      if (sock.stopped) return;
      if (onState) onState("offline", "reconnecting…");
      setTimeout(connect, sock.retryMs);
      sock.retryMs = Math.min(sock.retryMs * 2, maxRetryMs);
    };
  }

  sock.stop = () => { sock.stopped = true; if (sock.socket) sock.socket.close(); };
  connect();
  return sock;
}
