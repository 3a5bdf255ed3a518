// The page: microphone -> AudioWorklet (int16 at the context's rate) -> ws://.../asr -> transcript.
"use strict";
const $ = (id) => document.getElementById(id);
let socket = null, context = null, media = null, node = null;
let sentSamples = 0, rate = 16000, sends = [], latencies = [];

function setStatus(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

// The WebSocket's state beside the buttons: closed, connecting, open, closing or error.
function setConnection(state, text) {
  $("connection").dataset.state = state;
  $("connection").textContent = text;
}

// When the audio up to `seconds` left the page: the send time of the message holding that sample.
function sentAt(seconds) {
  for (const [until, at] of sends) if (until >= seconds - 1e-6) return at;
  return null;
}

function show(event) {
  if (event.error) { setStatus("error: " + event.error, true); return; }
  $("compute").textContent = event.compute_ms.toFixed(1);
  const at = sentAt(event.time);
  if (at !== null) {
    const ms = performance.now() - at;
    latencies.push(ms);
    const sorted = [...latencies].sort((a, b) => a - b);
    $("latency").textContent = ms.toFixed(0);
    $("latency-median").textContent = sorted[Math.floor(sorted.length / 2)].toFixed(0);
  }
  while (sends.length > 1 && sends[1][0] < event.time) sends.shift();
  if (event.is_final) {
    $("finals").appendChild(finalLine(event));
    $("partial").textContent = "";
  } else {
    $("partial").textContent = event.text;
  }
}

const LOW = 0.5; // words below this confidence are dimmed

// A final as a line of words, those the model is unsure of dimmed (every word's confidence on hover). The
// restored text has one token per plain word; where it does not, the line is shown as it came.
function finalLine(event) {
  const line = document.createElement("p");
  line.className = "final";
  const shown = event.text.split(" ");
  const words = event.words || [];
  if (shown.length !== words.length) {
    line.textContent = event.text;
    return line;
  }
  shown.forEach((text, i) => {
    const word = document.createElement("span");
    word.textContent = text;
    const confidence = words[i].confidence;
    if (confidence !== undefined) {
      word.title = `confidence ${confidence.toFixed(2)}`;
      if (confidence < LOW) word.className = "low";
    }
    line.append(word, i + 1 < shown.length ? " " : "");
  });
  return line;
}

async function start() {
  $("start").disabled = true;
  try {
    media = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
    context = new AudioContext();
    await context.audioWorklet.addModule("/worklet.js");
  } catch (err) {
    setStatus("microphone unavailable: " + err.message, true);
    $("start").disabled = false;
    return;
  }
  rate = context.sampleRate;
  $("rate").textContent = rate;
  sentSamples = 0; sends = []; latencies = [];
  const token = new URLSearchParams(location.search).get("token");
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  setConnection("connecting", "connecting\u2026");
  socket = new WebSocket(`${scheme}//${location.host}/asr` + (token ? "?token=" + encodeURIComponent(token) : ""));
  socket.binaryType = "arraybuffer";
  socket.onerror = () => setConnection("error", "connection failed");
  socket.onopen = () => {
    setConnection("open", "connected");
    const hotwords = $("hotwords").value.split("\n").filter((line) => line.trim());
    socket.send(JSON.stringify(hotwords.length ? { sample_rate: rate, hotwords } : { sample_rate: rate }));
    node = new AudioWorkletNode(context, "pcm-sender");
    node.port.onmessage = (message) => {
      if (!socket || socket.readyState !== WebSocket.OPEN) return;
      socket.send(message.data);
      sentSamples += message.data.byteLength / 2;
      sends.push([sentSamples / rate, performance.now()]);
      $("sent").textContent = (sentSamples / rate).toFixed(1);
    };
    context.createMediaStreamSource(media).connect(node);
    const mute = context.createGain();  // keeps the graph pulled by the output, without playing anything
    mute.gain.value = 0;
    node.connect(mute).connect(context.destination);
    context.resume();
    setStatus("listening");
    $("stop").disabled = false;
  };
  socket.onmessage = (message) => show(JSON.parse(message.data));
  socket.onclose = (event) => {
    if ($("connection").dataset.state !== "error") {
      setConnection("closed", event.code === 1000 ? "disconnected" : `disconnected (${event.code})`);
    }
    if (event.code === 1000) setStatus("stopped");
    else if (!$("status").classList.contains("error")) setStatus(`closed (${event.code} ${event.reason})`, true);
    release();
    $("start").disabled = false;
    $("stop").disabled = true;
  };
}

function release() {
  if (node) { node.port.onmessage = null; node.disconnect(); node = null; }
  if (media) { media.getTracks().forEach((track) => track.stop()); media = null; }
  if (context) { context.close(); context = null; }
}

function stop() {
  $("stop").disabled = true;
  release();
  if (socket && socket.readyState === WebSocket.OPEN) {
    setStatus("finishing");
    setConnection("closing", "finishing\u2026");
    socket.send(JSON.stringify({ type: "end" }));
  }
}

$("start").addEventListener("click", start);
$("stop").addEventListener("click", stop);
