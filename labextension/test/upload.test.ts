import { describe, expect, it } from 'vitest';

import { Item, asUpload, normalize, parseEvent, sizePair, uploadText } from '../src/state';

const job: Item = {
  key: 'hpc/42',
  id: '42',
  kind: 'job',
  name: 'llama-ft',
  profile: 'hpc',
  tier: 'slurm',
  state: 'COMPLETED',
  terminal: true,
  size: '2 x 4',
  where: 'node[1-2]',
  reason: '',
  started: null,
  elapsed_s: 60,
  summary: 'job 42 COMPLETED'
};
const URI = 's3://team-ckpt/jt/llama-ft/42/ckpt-000100/';

describe('uploadText (the job row of --checkpoint-to)', () => {
  it('shows the progress with both sizes in the unit of the total', () => {
    expect(uploadText({ state: 'uploading', sent: 1.2e9, total: 2.7e9 })).toBe('uploading 44 % (1.2 of 2.7 GB)');
    expect(uploadText({ state: 'uploading', sent: 1_215_000_000, total: 2_700_000_000, uri: URI })).toBe(
      `uploading 45 % (1.2 of 2.7 GB) to ${URI}`
    );
    expect(uploadText({ state: 'uploading', sent: 0, total: 12_500_000 })).toBe('uploading 0 % (0.0 of 12.5 MB)');
    expect(uploadText({ state: 'uploading', uri: URI })).toBe(`uploading to ${URI}`); // no size known yet
  });
  it('shows the final URI, a failure or where an interrupted upload stopped', () => {
    expect(uploadText({ state: 'done', uri: URI, sent: 5, total: 5 })).toBe(`checkpoint ${URI}`);
    expect(uploadText({ state: 'failed', uri: URI, error: 'bucket team-ckpt does not exist\nat x' })).toBe(
      'upload failed: bucket team-ckpt does not exist at x'
    );
    expect(uploadText({ state: 'interrupted', sent: 500, total: 2000 })).toBe(
      'upload interrupted at 25 % (0.5 of 2.0 kB) — job.upload() resumes it'
    );
    expect(uploadText(null)).toBe('');
    expect(uploadText(undefined)).toBe('');
  });
  it('formats sizes from bytes to terabytes', () => {
    expect(sizePair(3, 999)).toBe('3 of 999 B');
    expect(sizePair(1500, 2500)).toBe('1.5 of 2.5 kB');
    expect(sizePair(2e12, 3.5e12)).toBe('2.0 of 3.5 TB');
  });
});

describe('the upload field of a server item', () => {
  it('is kept when well formed and dropped otherwise', () => {
    expect(asUpload({ state: 'done', uri: URI, sent: 3, total: 3, extra: 1 })).toEqual({
      state: 'done',
      uri: URI,
      sent: 3,
      total: 3
    });
    expect(asUpload({ state: 'exploded' })).toBeNull();
    expect(asUpload('done')).toBeNull();
    expect(asUpload({ state: 'uploading', sent: -1, total: Number.NaN, uri: 7 })).toEqual({ state: 'uploading' });
    expect(normalize({ ...job, upload: { state: 'done', uri: URI } }).upload).toEqual({ state: 'done', uri: URI });
    expect(normalize(job).upload).toBeNull();
  });
  it('arrives through the websocket and renders in the row', () => {
    const frame = JSON.stringify({
      type: 'update',
      items: [{ ...job, upload: { state: 'uploading', sent: 1_215_000_000, total: 2_700_000_000 } }]
    });
    const msg = parseEvent(frame);
    expect(msg?.type).toBe('update');
    const item = normalize((msg as { items: Item[] }).items[0]);
    expect(uploadText(item.upload)).toBe('uploading 45 % (1.2 of 2.7 GB)');
  });
  it('never throws and stays one line on arbitrary input (seeded)', () => {
    let seed = 16005;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T,>(xs: T[]): T => xs[Math.floor(rand() * xs.length)];
    const values: unknown[] = ['done', 'uploading', 'failed', 'interrupted', 'x', '', 'a\nb', 0, -5, 1e15, NaN, null, [], {}];
    for (let i = 0; i < 2000; i++) {
      const raw: Record<string, unknown> = {};
      for (const key of ['state', 'uri', 'sent', 'total', 'error']) {
        if (rand() < 0.7) {
          raw[key] = pick(values);
        }
      }
      const text = uploadText(asUpload(raw));
      expect(text).not.toContain('\n');
    }
  });
});
