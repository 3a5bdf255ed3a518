// Audio thread: mono float samples -> little-endian int16 frames of about 50 ms, posted to the page.
class PcmSender extends AudioWorkletProcessor {
  constructor() {
    super();
    this.frame = new Int16Array(Math.round(sampleRate / 20));
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      for (let i = 0; i < channel.length; i++) {
        const s = Math.max(-1, Math.min(1, channel[i]));
        this.frame[this.filled++] = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
        if (this.filled === this.frame.length) {
          this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
          this.frame = new Int16Array(this.frame.length);
          this.filled = 0;
        }
      }
    }
    return true;
  }
}

registerProcessor("pcm-sender", PcmSender);
