// Audio thread: mono float samples -> little-endian int16 frames of about 50 ms, posted to the page.
// Exact zeros before the first sound (what a device gives while it starts) are not sent.
class PcmSender extends AudioWorkletProcessor {
  constructor() {
    super();
    this.size = Math.round(sampleRate / 20);
    this.frame = new Int16Array(this.size);
    this.filled = 0;
    this.heard = false;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      for (let i = 0; i < channel.length; i++) {
        if (!this.heard && channel[i] === 0) continue;
        this.heard = true;
        // x 32768 then clamp: int16 -> float (/ 32768) -> int16 is exact
        this.frame[this.filled++] = Math.max(-32768, Math.min(32767, Math.round(channel[i] * 32768)));
        if (this.filled === this.size) {
          this.port.postMessage(this.frame.buffer, [this.frame.buffer]);  // transferred: the array is now empty
          this.frame = new Int16Array(this.size);
          this.filled = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor("pcm-sender", PcmSender);
