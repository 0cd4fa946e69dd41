import { describe, expect, it } from 'vitest';
import { greyJpeg } from '../../../test/helpers/jpeg.ts';
import { readTemplate, type UploadedFile } from './template-import.ts';

const HEADER = 'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules,Target';
const files: UploadedFile[] = [
  { field: 'hat', filename: 'hat.jpg', bytes: greyJpeg(200, 200) },
  { field: 'images', filename: 'cape.jpg', bytes: greyJpeg(200, 200) },
  { field: 'images', filename: 'big.jpg', bytes: greyJpeg(400, 400) },
];

describe('challenge template', () => {
  it('reads every row, by field or file name, with the spec wording', () => {
    const csv = [
      HEADER,
      'HAT,Gold hat,Stream 60 minutes,hat,Total mins streamed,60',
      'CAPE,"Cape, red","Stream on 3 days",cape.jpg,unique days streamed on,3',
      'SOLO,Solo,One long stream,hat.jpg,Mins streamed in a single session,30',
      'STREAK,Streak,Days in a row,hat,Streak of days streamed on,2',
      'COUNT,Count,Five streams,hat,Stream session count,5',
    ].join('\r\n');
    const result = readTemplate(`\uFEFF${csv}\r\n`, files, new Set());
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.challenges.map((c) => [c.rewardCode, c.rewardTitle, c.rule.type, c.rule.target])).toEqual([
      ['HAT', 'Gold hat', 'totalMinutes', 60],
      ['CAPE', 'Cape, red', 'uniqueDays', 3],
      ['SOLO', 'Solo', 'singleSessionMinutes', 30],
      ['STREAK', 'Streak', 'streakDays', 2],
      ['COUNT', 'Count', 'sessionCount', 5],
    ]);
  });

  it('keeps formula-like cells as plain text', () => {
    const csv = `${HEADER}\n"=HYPERLINK(""http://evil.example"",""x"")",=1+1,@SUM(A1),hat,Total mins streamed,1\n`;
    const result = readTemplate(csv, files, new Set());
    expect(result.ok && result.challenges[0]).toMatchObject({
      rewardCode: '=HYPERLINK("http://evil.example","x")',
      rewardTitle: '=1+1',
      rewardRequirement: '@SUM(A1)',
    });
  });

  it('reports every bad row with its path and line', () => {
    const csv = [
      HEADER,
      'A,Title,Req,hat,Total mins streamed,10',
      'B,Title,Req,hat,Minutes of fun,10',
      'A,Title,Req,missing.jpg,Total mins streamed,0',
      'C,Title,Req,big.jpg,Total mins streamed,=5',
      'D,Title,Req,hat,Total mins streamed',
      'E,,Req,hat,Stream session count,1',
      'TAKEN,T,R,hat,Stream session count,1',
    ].join('\n');
    const result = readTemplate(csv, files, new Set(['TAKEN']));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.onlyImages).toBe(false);
    const paths = result.errors.map((e) => e.path);
    expect(paths).toEqual([
      'rows[1].Reward Rules',
      'rows[2].Reward Code',
      'rows[2].Target',
      'rows[2].Reward Image',
      'rows[3].Target',
      'rows[3].Reward Image',
      'rows[4]',
      'rows[5].Reward Title',
      'rows[6].Reward Code',
    ]);
    expect(result.errors[0].message).toMatch(/unknown rule "Minutes of fun".*Total mins streamed/);
    expect(result.errors[0].message).toContain('(line 3)');
    expect(result.errors[5].message).toMatch(/400×400/);
  });

  it('says when only images are wrong', () => {
    const result = readTemplate(`${HEADER}\nA,T,R,big.jpg,Total mins streamed,1\n`, files, new Set());
    expect(result).toMatchObject({ ok: false, onlyImages: true });
  });

  it.each([
    [
      'a wrong header',
      'Code,Title,Requirement,Image,Rules,Target\nA,T,R,hat,Total mins streamed,1',
      'template.header',
    ],
    [
      'a missing column',
      'Reward Code,Reward Title,Reward Requirement,Reward Image,Reward Rules\nA,T,R,hat,x',
      'template.header',
    ],
    ['no rows', `${HEADER}\n`, 'template'],
    ['empty', '', 'template'],
    ['broken quoting', `${HEADER}\n"A,T,R,hat,Total mins streamed,1`, 'template'],
  ])('rejects %s', (_name, csv, path) => {
    const result = readTemplate(csv, files, new Set());
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.errors[0].path).toBe(path);
  });
});
