/**
 * Real, decodable JPEGs for tests, built by hand: a baseline greyscale image of one mid-grey, any
 * size. Every 8×8 block is "DC difference 0, end of block", which two one-code Huffman tables
 * encode as four zero bits.
 */
export function greyJpeg(width: number, height: number): Buffer {
  const segment = (marker: number, payload: number[]) => [
    0xff,
    marker,
    (payload.length + 2) >> 8,
    (payload.length + 2) & 0xff,
    ...payload,
  ];
  const jfif = segment(0xe0, [0x4a, 0x46, 0x49, 0x46, 0x00, 1, 1, 0, 0, 1, 0, 1, 0, 0]);
  const dqt = segment(0xdb, [0x00, ...new Array(64).fill(1)]);
  const sof = segment(0xc0, [8, height >> 8, height & 0xff, width >> 8, width & 0xff, 1, 1, 0x11, 0]);
  // One code of length 2 ("00") in each table: DC category 0, AC end-of-block.
  const counts = [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
  const dht = segment(0xc4, [0x00, ...counts, 0x00, 0x10, ...counts, 0x00]);
  const sos = segment(0xda, [1, 1, 0x00, 0, 63, 0]);
  const blocks = Math.ceil(width / 8) * Math.ceil(height / 8);
  const bits = blocks * 4;
  const data = new Array<number>(Math.ceil(bits / 8)).fill(0);
  if (bits % 8 !== 0) data[data.length - 1] = 0xff >> (bits % 8); // pad with one bits
  return Buffer.from([0xff, 0xd8, ...jfif, ...dqt, ...sof, ...dht, ...sos, ...data, 0xff, 0xd9]);
}
